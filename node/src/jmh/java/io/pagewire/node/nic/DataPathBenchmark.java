package io.pagewire.node.nic;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The per-page paths of the NIC, each alone: a translation per registration mode with a warm TLB or
 * shadow table (lock the frame for a DMA, release it), the gather of a 4 KiB page into a packet
 * payload, and the scatter of a 4 KiB payload into a frame. Run with {@code -prof gc}: the hit paths
 * must allocate nothing per operation (gather stages the page in the outbox's reused array).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class DataPathBenchmark {
    @Param({"PINNED", "PIN_ON_MISS", "SHADOW", "ON_DEMAND"})
    public RegistrationMode mode;

    private static final int PAGES = 64;

    private KernelAgent kernel;
    private Nic nic;
    private MemoryRegion region;
    private DmaEngine dma;
    private Outbox outbox;
    private long base;
    private int page;
    private final long[] notResident = new long[1];
    private final ByteBuffer payload = ByteBuffer.allocateDirect(4096);

    @Setup(Level.Trial)
    public void setUp() {
        kernel = KernelAgent.start(new KernelContext().name("bench").physicalMemoryBytes(16 << 20).swapBytes(16 << 20));
        nic = new Nic("bench", kernel, new NicContext(), NicTimers.threaded("bench"), null);
        Endpoint endpoint = nic.openEndpoint("bench");
        long length = PAGES * 4096L;
        base = endpoint.space().allocate(length);
        endpoint.space().store(base, new byte[(int) length], 0, (int) length);
        region = endpoint.register(base, length, mode, Access.all());
        dma = nic.dma();
        outbox = new Outbox(nic.router(), nic.dma());
        // Warm every translation once, as traffic would.
        for (int p = 0; p < PAGES; p++) {
            dma.release(dma.acquire(region, (base >>> 12) + p, true, Side.RECEIVE, false, null), true);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        nic.close();
        kernel.close();
    }

    private long nextVpn() {
        page = (page + 1) & (PAGES - 1);
        return (base >>> 12) + page;
    }

    /** One warm translation: look up, lock the frame for a DMA, unlock it. */
    @Benchmark
    public long translateWarm() {
        long t = dma.acquire(region, nextVpn(), false, Side.SEND, false, null);
        dma.release(t, false);
        return t;
    }

    /** A send: a 4 KiB page staged as a packet payload, its frame locked until the packet leaves. */
    @Benchmark
    public int gatherPage() {
        int at = dma.gather(region, nextVpn() << 12, 4096, Side.SEND, false, outbox, notResident);
        outbox.flush();
        return at;
    }

    /** A receive: a 4 KiB payload copied into its frame under a DMA lock. */
    @Benchmark
    public long scatterPage() {
        long t = dma.acquire(region, nextVpn(), true, Side.RECEIVE, false, null);
        payload.clear();
        dma.memory().write(Tlb.frameOf(t), 0, payload);
        dma.release(t, true);
        return t;
    }
}
