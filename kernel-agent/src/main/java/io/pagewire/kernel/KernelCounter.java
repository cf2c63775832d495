package io.pagewire.kernel;

import io.pagewire.config.CountedEvent;
import io.pagewire.config.Meter;
import java.util.List;

/** The kernel agent's event counters, each declared once with the meter series that exports it. */
public enum KernelCounter implements CountedEvent {
    CPU_FAULTS_MINOR(Family.PAGE_FAULTS, "origin", "cpu", "kind", "minor"),
    CPU_FAULTS_MAJOR(Family.PAGE_FAULTS, "origin", "cpu", "kind", "major"),
    NIC_FAULTS_MINOR(Family.PAGE_FAULTS, "origin", "nic", "kind", "minor"),
    NIC_FAULTS_MAJOR(Family.PAGE_FAULTS, "origin", "nic", "kind", "major"),
    SWAP_INS(Meter.counter("pagewire.swap.ins", "pages", "Pages read from swap")),
    SWAP_OUTS(Meter.counter("pagewire.swap.outs", "pages", "Dirty pages written to swap")),
    EVICTIONS(Meter.counter("pagewire.evictions", "pages", "Frames taken from their pages by page replacement")),
    INVALIDATIONS(Meter.counter("pagewire.kernel.invalidations", "pages", "Pages whose translations NICs were told to drop")),
    PINS(Meter.counter("pagewire.pins", "Pin operations")),
    UNPINS(Meter.counter("pagewire.unpins", "Unpin operations")),
    PINS_REVOKED(Meter.counter("pagewire.pins.revoked", "Pins dropped because their pages were freed")),
    CPU_UNMAPS_REQUESTED(Meter.counter("pagewire.kernel.cpu.unmaps.requested",
            "Pages reclaim asked a CPU (the C verbs library) to unmap from a program before it could take their frames")),
    PIN_LIMIT_REJECTIONS(Meter.counter("pagewire.pin.limit.rejections", "Pins refused by the memlock limit, an application's share or the node pin limit")),
    ACCOUNT_SHARE_REJECTIONS(Meter.counter("pagewire.memory.share.rejections",
            "New pages refused because their application held its share of the node's frames and swap (pagewire.quota.callerShare)")),
    OUT_OF_MEMORY(Meter.counter("pagewire.out.of.memory", "Page faults that found no frame (memory and swap exhausted)")),
    CPU_GUARDS_TAKEN_BACK(Meter.counter("pagewire.kernel.cpu.guards.taken.back",
            "Frame guards the node took back from applications: held when their session ended, or naming no session")),
    STALE_TRANSLATIONS(Meter.counter("pagewire.stale.translations", "DMA locks refused because a translation raced with reclaim")),
    SYSTEM_BUFFER_PARKED(Family.SYSTEM_BUFFER_PARTS, "event", "parked"),
    SYSTEM_BUFFER_PARKED_BYTES(Meter.counter("pagewire.system.buffer.parked", "bytes", "Bytes parked in the system buffer")),
    SYSTEM_BUFFER_DELIVERED(Family.SYSTEM_BUFFER_PARTS, "event", "delivered"),
    SYSTEM_BUFFER_DISCARDED(Family.SYSTEM_BUFFER_PARTS, "event", "discarded");

    /** Meters whose series several counters make up. */
    private static final class Family {
        static final Meter PAGE_FAULTS = Meter.counter("pagewire.kernel.page.faults",
                "Page faults the kernel served, by origin (cpu, nic) and kind (minor: no I/O, major: read from swap)");
        static final Meter SYSTEM_BUFFER_PARTS = Meter.counter("pagewire.system.buffer.parts",
                "Page-sized parts of received data in the system buffer, by event: parked, delivered into their page once it was in,"
                        + " discarded because their page was freed");
    }

    private final Meter meter;
    private final List<String> tags;

    KernelCounter(Meter meter, String... tags) {
        this.meter = meter;
        this.tags = List.of(tags);
    }

    /** Its index in {@link KernelCounters}. */
    int id() {
        return ordinal();
    }

    @Override
    public Meter meter() {
        return meter;
    }

    @Override
    public List<String> tags() {
        return tags;
    }
}
