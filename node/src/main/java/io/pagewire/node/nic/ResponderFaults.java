package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The page faults a NIC raises for its peers' requests (a receive into a non-resident ON_DEMAND page,
 * a READ from a non-resident source): served asynchronously by the kernel's fault service, one fault
 * per page at a time however many packets hit it, and the reason the last one failed kept so that the
 * responder refuses the request instead of answering RNR NAK for ever.
 */
final class ResponderFaults {
    private final NicServices nic;
    private final Set<Long> inFlight = ConcurrentHashMap.newKeySet();
    private final Map<Long, String> failed = new ConcurrentHashMap<>();

    ResponderFaults(NicServices nic) {
        this.nic = nic;
    }

    /**
     * Faults a page in for a later retry of the request that found it missing; once in, its mode may cache it.
     *
     * @return true if this raised the fault, false if one on the page was in flight already
     */
    boolean raise(MemoryRegion region, long vpn, boolean write, Side side) {
        AddressSpace space = region.endpoint().space();
        long key = Tlb.key(space.id(), vpn);
        if (!inFlight.add(key)) {
            return false; // retransmissions find it served
        }
        region.policy().fault(region, vpn, write, side).whenComplete((fault, error) -> {
            try {
                if (error != null) {
                    Throwable cause = error.getCause() != null ? error.getCause() : error;
                    nic.counters().increment(NicCounter.RECEIVE_FAULTS_FAILED);
                    failed.put(key, cause.getMessage());
                }
            } finally {
                // Only now: a retransmission that found no translation while it was being installed
                // must not fault the page a second time (one page brought in, one fault counted).
                inFlight.remove(key);
            }
        });
        return true;
    }

    /** Why the last fault on a page failed, if it did, forgetting it. */
    String takeFailure(AddressSpace space, long vpn) {
        return failed.remove(Tlb.key(space.id(), vpn));
    }
}
