package io.pagewire.node.nic;

import java.util.Locale;

/** Why the NIC's work waited: the mechanisms whose cost the three research systems trade against each other. */
public enum WaitCause {
    /** U-Net/MM (PIN_ON_MISS): a lane stalled while the kernel pinned, and maybe faulted in, a receive's page. */
    RECEIVE_STALL,
    /** NetVM (SHADOW): a received part sat in the system buffer until the kernel brought its page in. */
    SYSTEM_BUFFER,
    /** NIC on-demand paging (ON_DEMAND): a requester's back-off after an RNR NAK, from the NAK to the resend. */
    RNR,
    /** A requester had data to send and no receive credits left for it. */
    CREDITS,
    /** A requester had data to send and its session had used its send allowance (pagewire.quota.sendBytesPerSecondPerSession). */
    RATE_LIMIT;

    /** The metrics tag: {@code receive_stall}, {@code system_buffer}, {@code rnr}, {@code credits}, {@code rate_limit}. */
    public String tag() {
        return name().toLowerCase(Locale.ROOT);
    }
}
