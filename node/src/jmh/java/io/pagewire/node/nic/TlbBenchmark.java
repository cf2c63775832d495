package io.pagewire.node.nic;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The NIC TLB alone: a hit (the key is cached) and a miss that reserves a slot and fills it, evicting
 * another entry (a working set of twice the TLB's entries, so every lookup misses under LRU).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class TlbBenchmark {
    private static final int ENTRIES = 1024;
    private Tlb tlb;
    private long hitKey;
    private long missVpn;

    @Setup
    public void setUp() {
        tlb = new Tlb(ENTRIES, 8, TlbReplacement.LRU, TlbIndexing.HASHED, 1);
        hitKey = Tlb.key(1, 7);
        Tlb.Reservation r = tlb.reserve(hitKey);
        tlb.fill(r, 3, 1, false, () -> true);
    }

    @Benchmark
    public long hit() {
        return tlb.lookup(hitKey, false);
    }

    @Benchmark
    public long missAndFill() {
        missVpn = (missVpn + 1) % (2 * ENTRIES);
        long key = Tlb.key(2, missVpn);
        long t = tlb.lookup(key, false);
        if (t == Tlb.MISS) {
            Tlb.Reservation r = tlb.reserve(key);
            if (r != null) {
                tlb.fill(r, (int) missVpn, 1, false, () -> true);
            }
        }
        return t;
    }
}
