package io.pagewire.node.nic;

import io.pagewire.kernel.FaultKind;

/** Told of every page fault the NIC had served and how long its service took: how metrics see fault costs. */
@FunctionalInterface
public interface FaultObserver {
    /**
     * @param serviceNs from the kernel taking the fault to the page being resident (for PIN_ON_MISS,
     *     the whole pin that faulted it in)
     */
    void served(Side side, FaultKind kind, RegistrationMode mode, long serviceNs);
}
