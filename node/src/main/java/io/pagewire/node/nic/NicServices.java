package io.pagewire.node.nic;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.NanoClock;

/**
 * What a NIC's parts call, made once by the NIC and handed to each (as Aeron's agents get the driver's
 * context, never the conductor): the node's id, the NIC's settings, clock, timers and counters, the
 * kernel beneath it, the DMA engine, its context cache and where waits and faults are reported.
 */
record NicServices(String nodeId, NicContext context, NanoClock clock, NicTimers timers, NicCounters counters, KernelAgent kernel,
        DmaEngine dma, ContextCaches contexts, NicObservers observers) {
}
