package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/**
 * Address spaces of one owner share one account: together they hold at most its share of the node's
 * frames and swap and of its pin limit, and another owner still gets pages (the first one's go to swap)
 * and pins. What they held is given back when they free it or close.
 */
class AccountTest {
    private static final int PAGE = TestKernels.PAGE;

    @Test
    void oneOwnerStopsAtItsShareOfFramesAndSwapAndAnotherStillGetsPages() {
        // 64 frames and 64 swap pages: half is 64 pages.
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(64, 64).callerShare(0.5))) {
            AddressSpace first = kernel.createAddressSpace("greedy");
            AddressSpace second = kernel.createAddressSpace("greedy");
            assertThat(first.account()).as("one owner, one account").isSameAs(second.account());
            long a = first.allocate(48L * PAGE);
            long b = second.allocate(48L * PAGE);
            first.store(a, new byte[48 * PAGE], 0, 48 * PAGE);
            second.store(b, new byte[16 * PAGE], 0, 16 * PAGE);
            assertThat(kernel.account("greedy").heldPages()).isEqualTo(64);
            assertThatThrownBy(() -> second.touch(b + 16L * PAGE, true)).isInstanceOf(MemoryExhaustedException.class)
                    .hasMessageContaining("out of memory for greedy").hasMessageContaining("pagewire.quota.callerShare");
            assertThat(kernel.counters().get(KernelCounter.ACCOUNT_SHARE_REJECTIONS)).isEqualTo(1);

            AddressSpace other = kernel.createAddressSpace("other");
            long c = other.allocate(64L * PAGE);
            byte[] data = TestKernels.pattern(7, 64 * PAGE);
            other.store(c, data, 0, data.length);
            assertThat(kernel.account("other").heldPages()).isEqualTo(64);
            byte[] back = new byte[data.length];
            other.load(c, back, 0, back.length);
            assertThat(back).isEqualTo(data);
            assertThat(first.swappedPages() + second.swappedPages()).as("greedy's pages made room in swap").isPositive();

            first.free(a);
            assertThat(kernel.account("greedy").heldPages()).as("freeing gives pages back, resident or swapped").isEqualTo(16);
            second.touch(b + 16L * PAGE, true);
            second.close();
            first.close();
            assertThat(kernel.account("greedy")).as("the account goes with its last address space").isNull();
        }
    }

    @Test
    void oneOwnerStopsAtItsShareOfThePinLimitAndAnotherStillPins() {
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(64, 0).nodePinLimitBytes(32L * PAGE).callerShare(0.5))) {
            AddressSpace greedy = kernel.createAddressSpace("greedy");
            AddressSpace alsoGreedy = kernel.createAddressSpace("greedy");
            long a = greedy.allocate(16L * PAGE);
            long b = alsoGreedy.allocate(16L * PAGE);
            greedy.pinRange(a, 12L * PAGE);
            assertThatThrownBy(() -> alsoGreedy.pinRange(b, 8L * PAGE)).isInstanceOf(PinLimitExceededException.class)
                    .hasMessageContaining("pin share exceeded").hasMessageContaining("greedy")
                    .satisfies(e -> assertThat(((PinLimitExceededException) e).limit()).isEqualTo(PinLimitExceededException.Limit.SHARE));
            alsoGreedy.pinRange(b, 4L * PAGE);
            assertThat(kernel.account("greedy").pinnedPages()).isEqualTo(16);

            AddressSpace other = kernel.createAddressSpace("other");
            long c = other.allocate(16L * PAGE);
            other.pinRange(c, 16L * PAGE);
            assertThat(kernel.stats().pinnedPages()).isEqualTo(32);
            greedy.free(a);
            assertThat(kernel.account("greedy").pinnedPages()).as("pins of freed memory are given back").isEqualTo(4);
        }
    }

    @Test
    void anAddressSpaceWithoutAnOwnerIsAnAccountOfItsOwn() {
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 16))) {
            AddressSpace one = kernel.createAddressSpace();
            AddressSpace two = kernel.createAddressSpace();
            assertThat(one.account()).isNotSameAs(two.account());
            assertThat(one.account().owner()).isEqualTo(one.toString());
        }
    }
}
