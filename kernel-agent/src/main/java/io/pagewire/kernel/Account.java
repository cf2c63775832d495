package io.pagewire.kernel;

/**
 * One application's holdings in a node's memory: the pages its address spaces hold (resident or in
 * swap) and the pages they pin, bounded by its share of the node's frames and swap and of its pin
 * limit ({@code pagewire.quota.callerShare}), so that no one application can take every page or pin
 * and lock the others out. Guarded by the kernel lock.
 */
public final class Account {
    private final String owner;
    private final boolean shared;
    private int heldPages;
    private int pinnedPages;
    private int spaces;

    Account(String owner, boolean shared) {
        this.owner = owner;
        this.shared = shared;
    }

    /**
     * Whether the account is an application's, bounded by its share of the node; an address space
     * opened without an owner (the node's own use, a test of the kernel) is bounded only by the node.
     */
    public boolean shared() {
        return shared;
    }

    /** Whom the account is for: the caller the node authenticated, or the address space itself. */
    public String owner() {
        return owner;
    }

    /** Pages of its address spaces that hold content: resident, or in swap. */
    public int heldPages() {
        return heldPages;
    }

    /** Distinct pages of its address spaces with at least one pin. */
    public int pinnedPages() {
        return pinnedPages;
    }

    void held(int delta) {
        heldPages += delta;
    }

    void pinned(int delta) {
        pinnedPages += delta;
    }

    void spaceOpened() {
        spaces++;
    }

    /** One of its address spaces closed; true once none is left. */
    boolean spaceClosed() {
        return --spaces == 0;
    }

    @Override
    public String toString() {
        return owner;
    }
}
