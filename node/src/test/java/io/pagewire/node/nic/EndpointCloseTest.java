package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.MemoryStats;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An endpoint's close releases everything it holds (queue pairs and their credits, regions and their
 * pins, frames, swap, outstanding work requests), whatever fails on the way: a close that stopped at its
 * first error once left 64 MiB of pins behind for good, and three such sessions exhausted a node.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EndpointCloseTest {
    private static final int MIB = 1 << 20;

    private static void assertNothingHeld(KernelAgent kernel, Nic nic, String after) {
        MemoryStats stats = kernel.stats();
        assertThat(stats.pinnedPages()).as("pinned pages after " + after).isZero();
        assertThat(stats.residentPages()).as("frames in use after " + after).isZero();
        assertThat(stats.swapSlotsUsed()).as("swap slots in use after " + after).isZero();
        assertThat(stats.addressSpaces()).as("address spaces after " + after).isZero();
        assertThat(nic.endpoints()).as("endpoints after " + after).isEmpty();
        assertThat(nic.queuePairs()).as("queue pairs after " + after).isEmpty();
        assertThat(nic.creditsGranted()).as("receive credits granted after " + after).isZero();
        assertThat(nic.workRequestsOutstanding()).as("work requests outstanding after " + after).isZero();
    }

    @Test
    void twoShadowRegionsAndSixtyFourPinnedMebibytesAreReleasedAfterTheSecondRegionsMemoryWasFreed() {
        KernelContext kernelContext = new KernelContext().name("close").physicalMemoryBytes(128L * MIB).swapBytes(0).memlockLimitBytes(80L * MIB);
        try (KernelAgent kernel = KernelAgent.start(kernelContext);
                Nic nic = new Nic("close", kernel, new NicContext(), NicTimers.threaded("close"), null)) {
            // Three times: what one such session left behind was enough for three to exhaust the node's pin limit.
            for (int session = 0; session < 3; session++) {
                Endpoint endpoint = nic.openEndpoint("session-" + session);
                long first = endpoint.space().allocate(MIB);
                long second = endpoint.space().allocate(MIB);
                long pinned = endpoint.space().allocate(64L * MIB);
                endpoint.space().store(first, new byte[MIB], 0, MIB);
                endpoint.space().store(second, new byte[MIB], 0, MIB);
                endpoint.register(first, MIB, RegistrationMode.SHADOW, Access.all());
                endpoint.register(second, MIB, RegistrationMode.SHADOW, Access.all());
                endpoint.register(pinned, 64L * MIB, RegistrationMode.PINNED, Access.all());
                assertThat(kernel.stats().pinnedBytes()).isEqualTo(64L * MIB);
                endpoint.space().free(second);
                endpoint.close();
                assertNothingHeld(kernel, nic, "session " + session + " ended");
            }
        }
    }

    /**
     * Random sequences of what a session does (allocate, touch, register in every mode, free under
     * regions, page out, deregister, queue pairs with and without a shared receive queue, posted
     * receives, counters), then its endpoints close in random order: nothing may be left. Bounded in
     * rounds and time; the seed is printed for replay ({@code -Dpagewire.fuzz.seed}).
     */
    @Test
    void closingAfterAnySequenceOfOperationsLeavesNothingBehind() {
        long seed = Long.getLong("pagewire.fuzz.seed", System.nanoTime());
        System.out.println("EndpointCloseTest seed " + seed + " (replay with -Dpagewire.fuzz.seed=" + seed + ")");
        Random random = new Random(seed);
        KernelContext kernelContext = new KernelContext().name("fuzz").physicalMemoryBytes(2L * MIB).swapBytes(4L * MIB)
                .memlockLimitBytes(MIB).systemBufferBytes(256 << 10);
        try (KernelAgent kernel = KernelAgent.start(kernelContext);
                Nic nic = new Nic("fuzz", kernel, new NicContext().ackTimeoutNs(5_000_000), NicTimers.threaded("fuzz"), null)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (int round = 0; round < 400 && System.nanoTime() < deadline; round++) {
                List<Endpoint> endpoints = new ArrayList<>();
                for (int i = 1 + random.nextInt(3); i > 0; i--) {
                    endpoints.add(nic.openEndpoint("round-" + round + "-" + i));
                }
                Session session = new Session(nic, endpoints, random);
                for (int step = 10 + random.nextInt(40); step > 0; step--) {
                    session.step();
                }
                Collections.shuffle(endpoints, random);
                for (Endpoint endpoint : endpoints) {
                    endpoint.close();
                }
                assertNothingHeld(kernel, nic, "round " + round + " (seed " + seed + ")");
            }
        }
    }

    /** What one round's application does, at random; refusals are expected, anything else is a failure. */
    private static final class Session {
        private final Nic nic;
        private final List<Endpoint> endpoints;
        private final Random random;
        private final List<long[]> allocations = new ArrayList<>(); // endpoint index, address, length
        private final List<MemoryRegion> regions = new ArrayList<>();
        private final List<QueuePair> pairs = new ArrayList<>();
        private final CompletionQueue cq;

        Session(Nic nic, List<Endpoint> endpoints, Random random) {
            this.nic = nic;
            this.endpoints = endpoints;
            this.random = random;
            this.cq = nic.createCompletionQueue();
        }

        void step() {
            try {
                switch (random.nextInt(10)) {
                    case 0, 1 -> allocate();
                    case 2 -> touch();
                    case 3, 4 -> register();
                    case 5 -> free();
                    case 6 -> pageOut();
                    case 7 -> deregister();
                    case 8 -> queuePair();
                    default -> receiveOrCounter();
                }
            } catch (NicException | KernelException e) {
                // Refused (a limit, a freed range, a closed object): what a bad request gets, and the round carries on.
            }
        }

        private Endpoint anyEndpoint() {
            return endpoints.get(random.nextInt(endpoints.size()));
        }

        private void allocate() {
            int index = random.nextInt(endpoints.size());
            long length = (1 + random.nextInt(64)) * 4096L;
            allocations.add(new long[] {index, endpoints.get(index).space().allocate(length), length});
        }

        private long[] anyAllocation() {
            return allocations.isEmpty() ? null : allocations.get(random.nextInt(allocations.size()));
        }

        private void touch() {
            long[] a = anyAllocation();
            if (a != null) {
                int length = (int) Math.min(a[2], 16 * 4096);
                endpoints.get((int) a[0]).space().store(a[1], new byte[length], 0, length);
            }
        }

        private void register() {
            long[] a = anyAllocation();
            if (a == null) {
                return;
            }
            Endpoint endpoint = endpoints.get((int) a[0]);
            RegistrationMode mode = RegistrationMode.values()[random.nextInt(RegistrationMode.values().length)];
            if (random.nextInt(8) == 0) {
                regions.add(endpoint.registerImplicit(Access.all()));
            } else {
                long offset = random.nextInt((int) (a[2] / 4096)) * 4096L;
                regions.add(endpoint.register(a[1] + offset, a[2] - offset, mode, Access.all()));
            }
        }

        private void free() {
            if (!allocations.isEmpty()) {
                long[] a = allocations.remove(random.nextInt(allocations.size()));
                endpoints.get((int) a[0]).space().free(a[1]);
            }
        }

        private void pageOut() {
            long[] a = anyAllocation();
            if (a != null) {
                endpoints.get((int) a[0]).space().pageOut(a[1], a[2]);
            }
        }

        private void deregister() {
            if (!regions.isEmpty()) {
                MemoryRegion region = regions.remove(random.nextInt(regions.size()));
                region.endpoint().deregister(region);
            }
        }

        private void queuePair() {
            Endpoint endpoint = anyEndpoint();
            SharedReceiveQueue srq = random.nextBoolean() ? endpoint.createSharedReceiveQueue() : null;
            QueuePair qp = nic.createQueuePair(endpoint, cq, srq);
            if (!pairs.isEmpty() && random.nextBoolean()) {
                QueuePair other = pairs.get(random.nextInt(pairs.size()));
                qp.connect(other.address());
                other.connect(qp.address());
            }
            pairs.add(qp);
        }

        private void receiveOrCounter() {
            if (random.nextBoolean()) {
                anyEndpoint().createEventCounter(EnumSet.allOf(Access.class));
                return;
            }
            if (pairs.isEmpty() || regions.isEmpty()) {
                return;
            }
            QueuePair qp = pairs.get(random.nextInt(pairs.size()));
            MemoryRegion region = regions.get(random.nextInt(regions.size()));
            if (region.endpoint() == qp.endpoint() && !region.implicit()) {
                qp.postReceive(new ReceiveRequest(random.nextInt(1000), region.lkey(), region.address(), (int) Math.min(region.length(), 8192)));
            }
        }
    }
}
