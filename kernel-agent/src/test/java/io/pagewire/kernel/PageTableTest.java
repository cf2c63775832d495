package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class PageTableTest {
    private final PageTable table = new PageTable(12);

    @Test
    void entriesAreCreatedOnDemandAndFoundAgain() {
        assertThat(table.get(42)).isNull();
        PageTableEntry entry = table.getOrCreate(42);
        assertThat(table.getOrCreate(42)).isSameAs(entry);
        assertThat(table.get(42)).isSameAs(entry);
        table.remove(42);
        assertThat(table.get(42)).isNull();
    }

    @Test
    void farApartPagesDoNotCollide() {
        long high = (1L << 35) + 7;
        PageTableEntry low = table.getOrCreate(7);
        PageTableEntry far = table.getOrCreate(high);
        assertThat(low).isNotSameAs(far);
        assertThat(table.get(high)).isSameAs(far);
        assertThat(table.get(7)).isSameAs(low);
    }

    @Test
    void forEachVisitsOnlyTheRangeInOrder() {
        long[] vpns = {3, 511, 512, 513, 262_143, 262_144, 1L << 30};
        for (long vpn : vpns) {
            table.getOrCreate(vpn);
        }
        List<Long> seen = new ArrayList<>();
        table.forEach(511, 262_145, (vpn, entry) -> seen.add(vpn));
        assertThat(seen).containsExactly(511L, 512L, 513L, 262_143L, 262_144L);
    }

    @Test
    void forEachToleratesRemovalOfTheVisitedEntry() {
        for (long vpn = 0; vpn < 1000; vpn++) {
            table.getOrCreate(vpn);
        }
        table.forEach(0, 1000, (vpn, entry) -> table.remove(vpn));
        List<Long> left = new ArrayList<>();
        table.forEach(0, 1L << 36, (vpn, entry) -> left.add(vpn));
        assertThat(left).isEmpty();
    }
}
