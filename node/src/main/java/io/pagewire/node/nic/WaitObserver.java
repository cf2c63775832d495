package io.pagewire.node.nic;

/** Told how long each of the NIC's waits lasted, when it ends: how metrics see stalls, parking, RNR back-off and credit waits. */
@FunctionalInterface
public interface WaitObserver {
    void waited(WaitCause cause, long nanos);
}
