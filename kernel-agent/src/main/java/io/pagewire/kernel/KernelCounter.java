package io.pagewire.kernel;

/** The kernel agent's event counters, each with a stable id and a label a person can read. */
public enum KernelCounter {
    CPU_FAULTS_MINOR(0, "page faults from CPU access served without I/O"),
    CPU_FAULTS_MAJOR(1, "page faults from CPU access served from swap"),
    NIC_FAULTS_MINOR(2, "page faults from the NIC served without I/O"),
    NIC_FAULTS_MAJOR(3, "page faults from the NIC served from swap"),
    SWAP_INS(4, "pages read from swap"),
    SWAP_OUTS(5, "dirty pages written to swap"),
    EVICTIONS(6, "frames taken from their pages by page replacement"),
    INVALIDATIONS(7, "pages whose translations listeners were told to drop"),
    PINS(8, "pages pinned"),
    UNPINS(9, "pages unpinned"),
    PINS_REVOKED(10, "pins dropped because their pages were freed"),
    PIN_LIMIT_REJECTIONS(11, "pin requests refused by the memlock or node pin limit"),
    OUT_OF_MEMORY(12, "page faults that found no frame (memory and swap exhausted)"),
    STALE_TRANSLATIONS(13, "DMA locks refused because the frame was reclaimed after translation"),
    SYSTEM_BUFFER_PARKED(14, "page-sized parts of received data parked in the system buffer"),
    SYSTEM_BUFFER_PARKED_BYTES(15, "bytes parked in the system buffer"),
    SYSTEM_BUFFER_DELIVERED(16, "parked parts copied into their pages after page-in"),
    SYSTEM_BUFFER_DISCARDED(17, "parked parts dropped because their pages were freed");

    private final int id;
    private final String label;

    KernelCounter(int id, String label) {
        this.id = id;
        this.label = label;
    }

    public int id() {
        return id;
    }

    public String label() {
        return label;
    }
}
