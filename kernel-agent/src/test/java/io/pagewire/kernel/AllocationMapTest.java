package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

/** An address space's reservations: rounding, guard pages, joins, cuts and the bytes they hold. */
class AllocationMapTest {
    private static final int PAGE = 4096;
    private final AllocationMap map = new AllocationMap(PAGE);

    @Test
    void reservationsArePageRoundedAndAGuardPageFollowsEach() {
        long a = map.reserve(1, "endpoint 1");
        long b = map.reserve(PAGE + 1, "endpoint 1");
        assertThat(a).isEqualTo(AddressSpace.FIRST_ADDRESS);
        assertThat(b).isEqualTo(a + 2 * PAGE);
        assertThat(map.bytes()).isEqualTo(3 * PAGE);
        assertThat(map.contains(a, PAGE)).isTrue();
        assertThat(map.contains(a + PAGE, 1)).as("the guard page").isFalse();
        assertThat(map.contains(b + PAGE, PAGE)).isTrue();
        assertThat(map.contains(b + PAGE, PAGE + 1)).as("a range past the allocation's end").isFalse();
        assertThat(map.contains(-1, 1)).isFalse();
        assertThat(map.contains(a, -1)).isFalse();
    }

    @Test
    void anAddressSpaceThatIsFullRefusesWithWhatIsLeft() {
        map.reserve(AddressSpace.END_ADDRESS - AddressSpace.FIRST_ADDRESS - 4L * PAGE, "endpoint 7");
        assertThatThrownBy(() -> map.reserve(8L * PAGE, "endpoint 7")).isInstanceOf(KernelException.class)
                .hasMessageContaining("cannot allocate 32 KiB").hasMessageContaining("left in endpoint 7");
        assertThatThrownBy(() -> map.reserve(Long.MAX_VALUE, "endpoint 7")).isInstanceOf(KernelException.class);
        assertThat(map.reserve(2L * PAGE, "endpoint 7")).as("what fits still fits").isPositive();
    }

    @Test
    void aRangeThatOverlapsOrTouchesAllocationsJoinsThem() {
        long base = 0x4000_0000L;
        assertThat(map.reserveAt(base, 2 * PAGE)).isEqualTo(2 * PAGE);
        assertThat(map.reserveAt(base + 4 * PAGE, PAGE)).isEqualTo(PAGE);
        // Touches the first at its end, overlaps nothing else, and reaches the second: one allocation of 5 pages.
        assertThat(map.reserveAt(base + 2 * PAGE, 2 * PAGE)).isEqualTo(2 * PAGE);
        assertThat(map.lengthAt(base)).isEqualTo(5 * PAGE);
        assertThat(map.lengthAt(base + 4 * PAGE)).isEqualTo(-1);
        assertThat(map.reserveAt(base + PAGE, PAGE)).as("already reserved").isZero();
        assertThat(map.bytes()).isEqualTo(5 * PAGE);
    }

    @Test
    void aCutSplitsTheAllocationsItCrossesAndSkipsWhatWasNotReserved() {
        long base = 0x4000_0000L;
        map.reserveAt(base, 4 * PAGE);
        map.reserveAt(base + 6 * PAGE, 4 * PAGE);
        map.cut(base + PAGE, base + 8 * PAGE);
        assertThat(map.lengthAt(base)).isEqualTo(PAGE);
        assertThat(map.lengthAt(base + 8 * PAGE)).isEqualTo(2 * PAGE);
        assertThat(map.contains(base + PAGE, 1)).isFalse();
        assertThat(map.contains(base + 7 * PAGE, 1)).isFalse();
        assertThat(map.bytes()).isEqualTo(3 * PAGE);
        map.remove(base);
        map.remove(base + 3 * PAGE); // none starts there
        assertThat(map.bytes()).isEqualTo(2 * PAGE);
        List<long[]> left = map.removeAll();
        assertThat(left).hasSize(1);
        assertThat(left.get(0)).containsExactly(base + 8 * PAGE, 2L * PAGE);
        assertThat(map.bytes()).isZero();
        assertThat(map.contains(base + 8 * PAGE, 1)).isFalse();
    }
}
