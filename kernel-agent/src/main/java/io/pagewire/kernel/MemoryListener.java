package io.pagewire.kernel;

/**
 * Told of changes to an address space's mappings: the NIC's side of the kernel's MMU notifier.
 *
 * <p>Callbacks run on the kernel's thread with the kernel lock held, so they must be short, must not
 * block on anything that waits for the kernel, and must not call back into the kernel. A NIC keeps
 * its TLB under its own lock; the lock order is kernel lock, then NIC lock, and a NIC never calls
 * the kernel while holding its own lock or a DMA lock.
 */
public interface MemoryListener {
    /**
     * A page became resident (first touch or page-in). A shadow page table records it here; a TLB
     * may ignore it.
     */
    default void mapped(AddressSpace space, long vpn, Translation translation) {
    }

    /**
     * Translations for pages [firstVpn, firstVpn + pageCount) must be dropped before this returns.
     * For {@link InvalidationReason#UNMAP} the kernel revokes every pin on those pages afterwards, so
     * the listener forgets its pins there rather than releasing them.
     */
    void invalidate(AddressSpace space, long firstVpn, long pageCount, InvalidationReason reason);

    /**
     * Reclaim wants page {@code vpn}, which a CPU maps in its own page tables: that CPU must unmap it and
     * then say so ({@link AddressSpace#releaseForCpu}); reclaim takes other frames meanwhile. Asked once
     * per mapping.
     */
    default void cpuUnmapWanted(AddressSpace space, long vpn) {
    }
}
