package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class TlbTest {
    private static long insert(Tlb tlb, long key, int frame, boolean pin) {
        Tlb.Reservation r = tlb.reserve(key);
        assertThat(r).isNotNull();
        assertThat(tlb.fill(r, frame, 7, pin, () -> true)).isTrue();
        return r.evictedKey();
    }

    @Test
    void aHitReturnsTheFrameAndGeneration() {
        Tlb tlb = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        assertThat(tlb.lookup(Tlb.key(1, 100), false)).isEqualTo(Tlb.MISS);
        insert(tlb, Tlb.key(1, 100), 42, false);
        long t = tlb.lookup(Tlb.key(1, 100), false);
        assertThat(Tlb.frameOf(t)).isEqualTo(42);
        assertThat(Tlb.generationOf(t)).isEqualTo(7);
        assertThat(tlb.lookup(Tlb.key(2, 100), false)).as("another address space").isEqualTo(Tlb.MISS);
    }

    @Test
    void anUnpinnedEntryDoesNotServeAPinOnMissLookup() {
        Tlb tlb = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        insert(tlb, Tlb.key(1, 5), 9, false);
        assertThat(tlb.lookup(Tlb.key(1, 5), true)).isEqualTo(Tlb.MISS);
        assertThat(tlb.lookup(Tlb.key(1, 5), false)).isNotEqualTo(Tlb.MISS);
    }

    @Test
    void aFullyAssociativeLruTlbEvictsTheLeastRecentlyUsed() {
        Tlb tlb = new Tlb(4, 4, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        for (int i = 0; i < 4; i++) {
            insert(tlb, Tlb.key(1, i), i, false);
        }
        tlb.lookup(Tlb.key(1, 0), false); // 0 is now the most recent; 1 the least
        assertThat(insert(tlb, Tlb.key(1, 4), 4, false)).isEqualTo(Tlb.key(1, 1));
        assertThat(tlb.lookup(Tlb.key(1, 0), false)).isNotEqualTo(Tlb.MISS);
    }

    @Test
    void fifoEvictsTheOldestInsertionWhateverWasUsed() {
        Tlb tlb = new Tlb(4, 4, TlbReplacement.FIFO, TlbIndexing.HASHED, 1);
        for (int i = 0; i < 4; i++) {
            insert(tlb, Tlb.key(1, i), i, false);
        }
        tlb.lookup(Tlb.key(1, 0), false);
        assertThat(insert(tlb, Tlb.key(1, 4), 4, false)).isEqualTo(Tlb.key(1, 0));
    }

    @Test
    void randomReplacementStaysInTheSetAndKeepsTheTlbFull() {
        Tlb tlb = new Tlb(64, 8, TlbReplacement.RANDOM, TlbIndexing.HASHED, 3);
        for (int i = 0; i < 1000; i++) {
            insert(tlb, Tlb.key(1, i), i, false);
        }
        assertThat(tlb.validEntries()).isEqualTo(64);
    }

    @Test
    void randomReplacementWithTheSameSeedEvictsTheSameEntries() {
        List<List<Long>> runs = new ArrayList<>();
        for (int run = 0; run < 2; run++) {
            Tlb tlb = new Tlb(64, 8, TlbReplacement.RANDOM, TlbIndexing.HASHED, 42);
            List<Long> evicted = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                evicted.add(insert(tlb, Tlb.key(1, i), i, false));
            }
            runs.add(evicted);
        }
        assertThat(runs.get(1)).isEqualTo(runs.get(0));
    }

    @Test
    void lowBitsIndexingPutsConsecutivePagesInConsecutiveSetsAndStridesInOne() {
        // 16 entries, 4 ways: 4 sets. Consecutive pages fill the TLB without an eviction...
        Tlb sequential = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.LOW_BITS, 1);
        for (int vpn = 0; vpn < 16; vpn++) {
            assertThat(insert(sequential, Tlb.key(1, vpn), vpn, false)).as("page %d evicted something", vpn).isEqualTo(-1L);
        }
        // ...while pages 4 apart share one set, whose fifth entry evicts the first.
        Tlb strided = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.LOW_BITS, 1);
        for (int i = 0; i < 4; i++) {
            assertThat(insert(strided, Tlb.key(1, 4L * i), i, false)).isEqualTo(-1L);
        }
        assertThat(insert(strided, Tlb.key(1, 16), 4, false)).isEqualTo(Tlb.key(1, 0));
        assertThat(strided.validEntries()).as("three sets stay empty").isEqualTo(4);
    }

    @Test
    void aDirectMappedTlbHoldsOneEntryPerSet() {
        // Eight sets of one way, indexed by the page number's low bits: page i lives in set i % 8.
        Tlb tlb = new Tlb(8, 1, TlbReplacement.LRU, TlbIndexing.LOW_BITS, 1);
        for (int i = 0; i < 100; i++) {
            insert(tlb, Tlb.key(1, i), i, false);
        }
        assertThat(tlb.validEntries()).as("every set holds one entry").isEqualTo(8);
        for (int i = 0; i < 100; i++) {
            boolean last = i >= 92; // the last page filled into each set
            assertThat(tlb.lookup(Tlb.key(1, i), false) != Tlb.MISS).as("page %d hits", i).isEqualTo(last);
        }
        // Two pages of one set evict each other; a page of another set is untouched.
        insert(tlb, Tlb.key(1, 200), 200, false); // set 0: evicts page 96
        assertThat(tlb.lookup(Tlb.key(1, 96), false)).isEqualTo(Tlb.MISS);
        assertThat(tlb.lookup(Tlb.key(1, 200), false)).isNotEqualTo(Tlb.MISS);
        assertThat(tlb.lookup(Tlb.key(1, 97), false)).isNotEqualTo(Tlb.MISS);
    }

    @Test
    void anInvalidationDuringAMissCancelsTheFill() {
        Tlb tlb = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        Tlb.Reservation r = tlb.reserve(Tlb.key(1, 10));
        // The kernel invalidates the page while the NIC is asking for its translation ...
        tlb.invalidate(1, 10, 1);
        // ... so the translation it got must not be cached.
        assertThat(tlb.fill(r, 3, 1, true, () -> true)).isFalse();
        assertThat(tlb.lookup(Tlb.key(1, 10), false)).isEqualTo(Tlb.MISS);
        assertThat(tlb.pinnedEntries()).isZero();
    }

    @Test
    void aStaleSequenceRefusesTheFill() {
        Tlb tlb = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        Tlb.Reservation r = tlb.reserve(Tlb.key(1, 10));
        assertThat(tlb.fill(r, 3, 1, false, () -> false)).isFalse();
        assertThat(tlb.validEntries()).isZero();
        assertThat(tlb.reserve(Tlb.key(1, 10))).as("the slot was released").isNotNull();
    }

    @Test
    void reservedSlotsAreNeitherHitsNorVictims() {
        Tlb tlb = new Tlb(2, 2, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        Tlb.Reservation a = tlb.reserve(Tlb.key(1, 1));
        Tlb.Reservation b = tlb.reserve(Tlb.key(1, 2));
        assertThat(tlb.reserve(Tlb.key(1, 3))).as("every way is being filled").isNull();
        assertThat(tlb.lookup(Tlb.key(1, 1), false)).isEqualTo(Tlb.MISS);
        tlb.cancel(a);
        assertThat(tlb.fill(b, 2, 0, false, () -> true)).isTrue();
        assertThat(tlb.reserve(Tlb.key(1, 3))).isNotNull();
    }

    @Test
    void invalidationReportsThePinnedEntriesItDropped() {
        Tlb tlb = new Tlb(1024, 8, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        for (int i = 0; i < 100; i++) {
            insert(tlb, Tlb.key(3, 1000 + i), i, i % 2 == 0);
        }
        assertThat(tlb.pinnedEntries()).isEqualTo(50);
        Tlb.Invalidated small = tlb.invalidate(3, 1000, 10);
        assertThat(small.dropped).isEqualTo(10);
        assertThat(small.pinnedCount).isEqualTo(5);
        // A range larger than the TLB is handled by one sweep over every entry.
        Tlb.Invalidated huge = tlb.invalidate(3, 0, 1L << 30);
        assertThat(huge.dropped).isEqualTo(90);
        assertThat(huge.pinnedCount).isEqualTo(45);
        assertThat(tlb.pinnedEntries()).isZero();
        assertThat(tlb.validEntries()).isZero();
    }

    @Test
    void dropStaleRemovesOnlyTheMatchingTranslation() {
        Tlb tlb = new Tlb(16, 4, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        insert(tlb, Tlb.key(1, 1), 5, false);
        tlb.dropStale(Tlb.key(1, 1), Tlb.pack(5, 6));
        assertThat(tlb.lookup(Tlb.key(1, 1), false)).as("another generation: kept").isNotEqualTo(Tlb.MISS);
        tlb.dropStale(Tlb.key(1, 1), Tlb.pack(5, 7));
        assertThat(tlb.lookup(Tlb.key(1, 1), false)).isEqualTo(Tlb.MISS);
    }
}
