package io.pagewire.tools.cli;

import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.pagewire.client.Access;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.impl.GrpcPagewire;
import io.pagewire.node.Transport;
import io.pagewire.proto.verbs.OpenSession;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.VerbsGrpc;
import io.pagewire.proto.verbs.WorkRequest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.ToDoubleFunction;

/**
 * How much one abusive client costs the others: a victim application's 64-byte write round trip
 * (one in flight) measured alone and while another client floods the same node, A B A B, with the
 * JVM's heap after a collection at the end of each phase. The floods are the issue's: sessions up to
 * the node's limit, opened and closed without end; registrations and deregistrations in a tight
 * loop; a session stream whose client posts and never reads; and, reported apart, a bulk writer
 * that fills the link the victim shares.
 */
final class Flood {
    /** One phase's figures. */
    /** One phase's figures; {@code floodSeconds} is how long the flood ran (its warm-up included), 0 alone. */
    record Phase(String name, double p50Us, double p99Us, double heapMiB, long floodOperations, double floodSeconds) {
        double floodOperationsPerSecond() {
            return floodSeconds == 0 ? 0 : floodOperations / floodSeconds;
        }
    }

    private final int pings;
    private final int rounds;
    private final double controlOpsPerSecond;
    private final long sendBytesPerSecondPerSession;

    /**
     * @param controlOpsPerSecond the nodes' pagewire.quota.controlOpsPerSecond (0: no pacing)
     * @param sendBytesPerSecondPerSession the nodes' pagewire.quota.sendBytesPerSecondPerSession (0: no send allowance)
     */
    Flood(int pings, int rounds, double controlOpsPerSecond, long sendBytesPerSecondPerSession) {
        this.pings = pings;
        this.rounds = rounds;
        this.controlOpsPerSecond = controlOpsPerSecond;
        this.sendBytesPerSecondPerSession = sendBytesPerSecondPerSession;
    }

    List<Phase> run() throws Exception {
        List<Phase> phases = new ArrayList<>();
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY,
                c -> {
                    c.verbs().controlOpsPerSecond(controlOpsPerSecond);
                    c.nic().sendBytesPerSecondPerSession(sendBytesPerSecondPerSession);
                    c.kernel().physicalMemoryBytes(64L << 20).swapBytes(0);
                });
                Pagewire a = Pagewire.connect(cluster.node(1).target(), cluster.connectOptions());
                Pagewire b = Pagewire.connect(cluster.node(2).target(), cluster.connectOptions())) {
            Endpoint sender = a.openEndpoint("victim");
            Endpoint receiver = b.openEndpoint("victim-peer");
            long src = sender.allocate(4096);
            long dst = receiver.allocate(4096);
            MemoryRegion from = sender.register(src, 4096, RegistrationMode.PINNED, Access.all());
            MemoryRegion to = receiver.register(dst, 4096, RegistrationMode.PINNED, Access.all());
            QueuePair qp = sender.connect(receiver);
            ping(qp, from, src, dst, to.rkey(), pings); // warm-up, not recorded
            for (int round = 0; round < rounds; round++) {
                phases.add(measure("alone", qp, from, src, dst, to.rkey(), null));
                for (String kind : List.of("sessions", "registrations", "unread-stream")) {
                    phases.add(measure("flood: " + kind, qp, from, src, dst, to.rkey(), new ControlFlood(cluster, kind)));
                }
                phases.add(measure("control-plane flood", qp, from, src, dst, to.rkey(), new ControlFlood(cluster, "all")));
                phases.add(measure("bulk writes on the same link", qp, from, src, dst, to.rkey(), new BulkFlood(cluster)));
            }
        }
        return phases;
    }

    private Phase measure(String name, QueuePair qp, MemoryRegion from, long src, long dst, long rkey, FloodLoad flood) throws Exception {
        if (flood != null) {
            flood.start();
            Thread.sleep(500); // under way before the victim measures
        }
        long[] us = ping(qp, from, src, dst, rkey, pings);
        long operations = flood == null ? 0 : flood.stop();
        double seconds = flood == null ? 0 : flood.ranSeconds();
        System.gc();
        double heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed() / 1048576.0;
        Arrays.sort(us);
        return new Phase(name, us[us.length / 2] / 1000.0, us[(int) (us.length * 0.99)] / 1000.0, heap, operations, seconds);
    }

    /** Round trips of one 64-byte write each, one in flight, in ns. */
    private static long[] ping(QueuePair qp, MemoryRegion from, long src, long dst, long rkey, int n) {
        long[] ns = new long[n];
        for (int i = 0; i < n; i++) {
            long start = System.nanoTime();
            qp.await(qp.write(from, src, 64, dst, rkey));
            ns[i] = System.nanoTime() - start;
        }
        return ns;
    }

    /** A flood on threads of its own, counting what it does until stopped. */
    private abstract static class FloodLoad {
        final AtomicLong operations = new AtomicLong();
        volatile boolean running = true;
        private final List<Thread> threads = new ArrayList<>();

        void thread(String name, Runnable body) {
            Thread t = new Thread(() -> {
                while (running) {
                    try {
                        body.run();
                    } catch (RuntimeException e) {
                        operations.incrementAndGet(); // a refusal is the flood working as intended
                    }
                }
            }, "flood-" + name);
            t.setDaemon(true);
            threads.add(t);
        }

        private long startedNs;
        private long stoppedNs;

        void start() {
            startedNs = System.nanoTime();
            threads.forEach(Thread::start);
        }

        long stop() throws InterruptedException {
            running = false;
            for (Thread t : threads) {
                t.join(30_000);
            }
            stoppedNs = System.nanoTime();
            cleanUp();
            return operations.get();
        }

        void cleanUp() {
        }

        double ranSeconds() {
            return (stoppedNs - startedNs) / 1e9;
        }
    }

    /** Sessions to the limit and back, registrations in a loop, and a stream that is never read. */
    private static final class ControlFlood extends FloodLoad {
        private static final String FLOODER = "flooder";
        private final Pagewire client;
        private final ManagedChannel raw;

        /** @param kind one of the floods (sessions, registrations, unread-stream), or all three together */
        ControlFlood(EmbeddedCluster cluster, String kind) {
            // Another application than the victim, with a certificate of its own: the node's per-caller limits tell them apart.
            TestbedCertificates.in(cluster.certificates()).issueApplication(FLOODER);
            ClientSecurity security = ClientSecurity.mutualTls(cluster.certificates(), FLOODER);
            client = Pagewire.connect(cluster.node(1).target(), cluster.connectOptions().withSecurity(security).withSharedMemory(false));
            raw = GrpcPagewire.channelBuilder(cluster.node(1).target(), security).build();
            if (kind.equals("all") || kind.equals("sessions")) {
                sessions();
            }
            if (kind.equals("all") || kind.equals("registrations")) {
                registrations();
            }
            if (kind.equals("all") || kind.equals("unread-stream")) {
                unreadStream();
            }
        }

        private void sessions() {
            thread("sessions", () -> {
                List<Endpoint> opened = new ArrayList<>();
                try {
                    for (int i = 0; i < 64 && running; i++) {
                        opened.add(client.openEndpoint("flood-" + i));
                        operations.incrementAndGet();
                    }
                } catch (PagewireException refused) {
                    operations.incrementAndGet();
                } finally {
                    opened.forEach(Endpoint::close);
                }
            });
        }

        private void registrations() {
            Endpoint registrar = client.openEndpoint("flood-registrar");
            long address = registrar.allocate(1 << 20);
            thread("registrations", () -> {
                registrar.register(address, 1 << 20, RegistrationMode.ON_DEMAND, Access.all()).close();
                operations.incrementAndGet();
            });
        }

        private void unreadStream() {
            thread("unread-stream", () -> {
                ClientCallStreamObserver<SessionRequest>[] stream = new ClientCallStreamObserver[1];
                VerbsGrpc.newStub(raw).session(new ClientResponseObserver<SessionRequest, SessionEvent>() {
                    @Override
                    public void beforeStart(ClientCallStreamObserver<SessionRequest> requests) {
                        requests.disableAutoRequestWithInitial(0);
                        stream[0] = requests;
                    }

                    @Override
                    public void onNext(SessionEvent value) {
                    }

                    @Override
                    public void onError(Throwable t) {
                    }

                    @Override
                    public void onCompleted() {
                    }
                });
                stream[0].onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("never-reads")).build());
                PostRequest.Builder post = PostRequest.newBuilder().setQpn(987_654);
                for (int i = 0; i < 16; i++) {
                    post.addRequests(WorkRequest.newBuilder().setWrId(i));
                }
                SessionRequest request = SessionRequest.newBuilder().setPost(post).build();
                while (running) {
                    if (stream[0].isReady()) {
                        stream[0].onNext(request);
                        operations.incrementAndGet();
                    } else {
                        sleepQuietly(1);
                    }
                }
                stream[0].cancel("the flood is over", null);
            });
        }

        @Override
        void cleanUp() {
            client.close();
            raw.shutdownNow();
        }
    }

    /** 64 KiB writes, 32 in flight, between the victim's two nodes. */
    private static final class BulkFlood extends FloodLoad {
        private final Pagewire a;
        private final Pagewire b;

        BulkFlood(EmbeddedCluster cluster) {
            a = Pagewire.connect(cluster.node(1).target(), cluster.connectOptions());
            b = Pagewire.connect(cluster.node(2).target(), cluster.connectOptions());
            Endpoint sender = a.openEndpoint("bulk");
            Endpoint receiver = b.openEndpoint("bulk-peer");
            int size = 64 << 10;
            long src = sender.allocate(size);
            long dst = receiver.allocate(size);
            MemoryRegion from = sender.register(src, size, RegistrationMode.PINNED, Access.all());
            MemoryRegion to = receiver.register(dst, size, RegistrationMode.PINNED, Access.all());
            QueuePair qp = sender.connect(receiver);
            thread("bulk", () -> {
                List<CompletableFuture<Completion>> inFlight = new ArrayList<>();
                for (int i = 0; i < 32; i++) {
                    inFlight.add(qp.write(from, src, size, dst, to.rkey()));
                }
                inFlight.forEach(qp::await);
                operations.addAndGet(32);
            });
        }

        @Override
        void cleanUp() {
            a.close();
            b.close();
        }
    }

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The medians over rounds of each kind of phase, and the ratios to the victim alone. */
    static String report(List<Phase> phases) {
        StringBuilder out = new StringBuilder(String.format("%-30s %10s %10s %12s %16s %14s%n", "phase", "p50 us", "p99 us", "heap MiB",
                "flood ops", "flood ops/s"));
        for (Phase p : phases) {
            out.append(String.format("%-30s %10.1f %10.1f %12.1f %,16d %,14.0f%n", p.name(), p.p50Us(), p.p99Us(), p.heapMiB(),
                    p.floodOperations(), p.floodOperationsPerSecond()));
        }
        double alone = median(phases, "alone", Phase::p50Us);
        double aloneHeap = median(phases, "alone", Phase::heapMiB);
        for (String kind : phases.stream().map(Phase::name).filter(n -> !n.equals("alone")).distinct().toList()) {
            out.append(String.format("# victim under %s / alone: p50 %.2fx, p99 %.2fx; heap after GC %.0f MiB vs %.0f MiB alone%n", kind,
                    median(phases, kind, Phase::p50Us) / alone, median(phases, kind, Phase::p99Us) / median(phases, "alone", Phase::p99Us),
                    median(phases, kind, Phase::heapMiB), aloneHeap));
        }
        return out.toString();
    }

    private static double median(List<Phase> phases, String name, ToDoubleFunction<Phase> value) {
        double[] values = phases.stream().filter(p -> p.name().equals(name)).mapToDouble(value).sorted().toArray();
        return values.length == 0 ? Double.NaN : values[values.length / 2];
    }
}
