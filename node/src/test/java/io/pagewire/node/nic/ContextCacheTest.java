package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/**
 * The NIC's context cache: contexts that fit are fetched once and then hit; one more than a set holds,
 * read in a cycle, misses every time under LRU (the cliff of a NIC with more connections than its cache
 * reaches); queue pairs and regions are counted apart, and without entries nothing is counted.
 */
class ContextCacheTest {
    private static long count(NicCounters counters, NicCounter counter) {
        return counters.get(counter);
    }

    @Test
    void contextsThatFitHitAfterTheirFirstFetchAndOneMoreThrashesLru() {
        NicCounters counters = new NicCounters();
        ContextCache cache = new ContextCache(8, 8, 0, counters);
        for (int round = 0; round < 2; round++) {
            for (int qpn = 1; qpn <= 8; qpn++) {
                cache.read(ContextCache.Kind.QUEUE_PAIR, qpn);
            }
        }
        assertThat(count(counters, NicCounter.CONTEXT_QP_MISSES)).isEqualTo(8);
        assertThat(count(counters, NicCounter.CONTEXT_QP_HITS)).isEqualTo(8);

        NicCounters thrashed = new NicCounters();
        ContextCache small = new ContextCache(8, 8, 0, thrashed);
        for (int round = 0; round < 3; round++) {
            for (int qpn = 1; qpn <= 9; qpn++) {
                small.read(ContextCache.Kind.QUEUE_PAIR, qpn);
            }
        }
        assertThat(count(thrashed, NicCounter.CONTEXT_QP_HITS)).as("nine contexts cycled through eight ways").isZero();
        assertThat(count(thrashed, NicCounter.CONTEXT_QP_MISSES)).isEqualTo(27);
    }

    @Test
    void regionsAreCountedApartAndNoEntriesMeansNothingModelled() {
        NicCounters counters = new NicCounters();
        ContextCache cache = new ContextCache(16, 4, 0, counters);
        cache.read(ContextCache.Kind.REGION, 0x1234);
        cache.read(ContextCache.Kind.REGION, 0x1234);
        cache.read(ContextCache.Kind.QUEUE_PAIR, 0x1234); // same number, another kind: another context
        assertThat(count(counters, NicCounter.CONTEXT_REGION_MISSES)).isEqualTo(1);
        assertThat(count(counters, NicCounter.CONTEXT_REGION_HITS)).isEqualTo(1);
        assertThat(count(counters, NicCounter.CONTEXT_QP_MISSES)).isEqualTo(1);

        NicCounters none = new NicCounters();
        ContextCache off = new ContextCache(0, 8, 1_000, none);
        off.read(ContextCache.Kind.QUEUE_PAIR, 1);
        assertThat(off.enabled()).isFalse();
        assertThat(count(none, NicCounter.CONTEXT_QP_MISSES) + count(none, NicCounter.CONTEXT_QP_HITS)).isZero();
    }

    @Test
    void waysMustDivideTheEntries() {
        assertThatThrownBy(() -> new NicContext().contextCacheEntries(100).contextCacheWays(8).conclude())
                .hasMessageContaining("pagewire.nic.contextCacheWays");
        // The settings and a running NIC's resize (Nic.contextCache) ask the same question.
        assertThat(ContextCache.shapeFits(0, 8)).as("no cache: ways do not matter").isTrue();
        assertThat(ContextCache.shapeFits(64, 8)).isTrue();
        assertThat(ContextCache.shapeFits(100, 8)).isFalse();
        assertThat(ContextCache.shapeFits(4, 8)).as("more ways than entries").isFalse();
    }
}
