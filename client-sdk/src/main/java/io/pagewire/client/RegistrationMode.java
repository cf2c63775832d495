package io.pagewire.client;

/** How a registered region's pages are translated and kept resident: the four designs Pagewire compares. */
public enum RegistrationMode {
    /** Classic {@code ibv_reg_mr}: the whole region pinned at registration. */
    PINNED,
    /** U-Net/MM: pages pinned while they sit in the NIC's TLB. */
    PIN_ON_MISS,
    /** NetVM: a shadow page table; receives into non-resident pages go to a system buffer. */
    SHADOW,
    /** On-demand paging: NIC page faults; receive faults answer RNR NAK. */
    ON_DEMAND
}
