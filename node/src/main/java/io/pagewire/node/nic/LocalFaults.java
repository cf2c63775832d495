package io.pagewire.node.nic;

import io.pagewire.kernel.BadAddressException;
import org.agrona.collections.LongHashSet;

/**
 * The page faults a queue pair's own requests raise on this node: a source page to gather a packet
 * from, a READ response's or an atomic result's target. Served through the region's mode (which may
 * cache the translation once the page is in); the pair sends nothing until every one is in, and a
 * page faults once however many responses land on it meanwhile. Guarded by the queue pair's lock.
 */
final class LocalFaults {
    /** What a served (or failed) fault is reported to, under the pair's lock. */
    interface Served {
        void served(SendWqe wqe, long vpn, Throwable error);
    }

    private final LongHashSet pending = new LongHashSet();
    private final Served served;

    LocalFaults(Served served) {
        this.served = served;
    }

    /** A local page is not resident: faults it in (once), the queue pair paused until it is. */
    void raise(SendWqe wqe, MemoryRegion region, long vpn, boolean write, Side side, Outbox out) {
        out.flush();
        if (!pending.add(vpn)) {
            return;
        }
        region.policy().fault(region, vpn, write, side).whenComplete((fault, error) -> served.served(wqe, vpn, error));
    }

    /** The fault on {@code vpn} was served or failed. */
    void resolved(long vpn) {
        pending.remove(vpn);
    }

    /** Whether a fault is still being served: the pair sends nothing meanwhile. */
    boolean any() {
        return !pending.isEmpty();
    }

    String describe() {
        return pending.isEmpty() ? "" : " fault-wait(" + pending.size() + ")";
    }

    /** The status of a request whose local memory failed it: a region gone or a bad address is a protection error, the rest a memory error. */
    static CompletionStatus statusOf(Throwable e) {
        return e instanceof RegionInvalidException || e instanceof BadAddressException ? CompletionStatus.LOCAL_PROTECTION_ERROR
                : CompletionStatus.LOCAL_MEMORY_ERROR;
    }
}
