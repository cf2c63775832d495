package io.pagewire.kernel;

/**
 * A radix-tree page table, like a hardware one: virtual page numbers of a 48-bit address space
 * split into 9-bit indices, one per level, with entries at the leaves. Interior nodes are created on
 * first use, so a sparse address space costs only the pages it touched. Guarded by the kernel lock.
 */
final class PageTable {
    static final int ADDRESS_BITS = 48;
    private static final int BITS_PER_LEVEL = 9;
    private static final int FANOUT = 1 << BITS_PER_LEVEL;

    private final int levels;
    private final Object[] root = new Object[FANOUT];

    PageTable(int pageShift) {
        int vpnBits = ADDRESS_BITS - pageShift;
        this.levels = (vpnBits + BITS_PER_LEVEL - 1) / BITS_PER_LEVEL;
    }

    /** The entry for a page, or null if the page was never touched. */
    PageTableEntry get(long vpn) {
        Object[] node = root;
        for (int level = levels - 1; level > 0; level--) {
            node = (Object[]) node[index(vpn, level)];
            if (node == null) {
                return null;
            }
        }
        return (PageTableEntry) node[index(vpn, 0)];
    }

    /** The entry for a page, created empty if the page was never touched. */
    PageTableEntry getOrCreate(long vpn) {
        Object[] node = root;
        for (int level = levels - 1; level > 0; level--) {
            int i = index(vpn, level);
            Object[] child = (Object[]) node[i];
            if (child == null) {
                child = new Object[FANOUT];
                node[i] = child;
            }
            node = child;
        }
        int leaf = index(vpn, 0);
        PageTableEntry entry = (PageTableEntry) node[leaf];
        if (entry == null) {
            entry = new PageTableEntry();
            node[leaf] = entry;
        }
        return entry;
    }

    /** Forgets a page's entry; interior nodes stay, as page-table pages do until the space exits. */
    void remove(long vpn) {
        Object[] node = root;
        for (int level = levels - 1; level > 0; level--) {
            node = (Object[]) node[index(vpn, level)];
            if (node == null) {
                return;
            }
        }
        node[index(vpn, 0)] = null;
    }

    /** Visits every entry of pages in [firstVpn, endVpn), skipping untouched subtrees. */
    void forEach(long firstVpn, long endVpn, EntryVisitor visitor) {
        visit(root, levels - 1, 0L, firstVpn, endVpn, visitor);
    }

    private void visit(Object[] node, int level, long prefix, long firstVpn, long endVpn, EntryVisitor visitor) {
        int shift = level * BITS_PER_LEVEL;
        for (int i = 0; i < FANOUT; i++) {
            long start = prefix | ((long) i << shift);
            long end = start + (1L << shift);
            if (end <= firstVpn || start >= endVpn || node[i] == null) {
                continue;
            }
            if (level == 0) {
                visitor.visit(start, (PageTableEntry) node[i]);
            } else {
                visit((Object[]) node[i], level - 1, start, firstVpn, endVpn, visitor);
            }
        }
    }

    private static int index(long vpn, int level) {
        return (int) (vpn >>> (level * BITS_PER_LEVEL)) & (FANOUT - 1);
    }

    /** Receives page-table entries in ascending page order. */
    @FunctionalInterface
    interface EntryVisitor {
        void visit(long vpn, PageTableEntry entry);
    }
}
