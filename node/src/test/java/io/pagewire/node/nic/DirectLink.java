package io.pagewire.node.nic;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Predicate;

/**
 * A wire between NICs in one JVM for protocol tests without gRPC: each node's inbound batches are
 * delivered in order on that node's own thread, payloads copied as a transport would; or, as a node's
 * several lanes deliver them, on several threads at once, each queue pair's packets in order on one of
 * them. A test can drop packets to exercise recovery.
 */
final class DirectLink implements AutoCloseable {
    private final Map<String, Nic> nics = new ConcurrentHashMap<>();
    private final Map<String, ExecutorService[]> inbound = new ConcurrentHashMap<>();
    private final int lanes;
    volatile Predicate<Packet> drop = p -> false;
    /** Nodes whose link is down: nothing reaches them, and their peers can tell. */
    private final java.util.Set<String> down = ConcurrentHashMap.newKeySet();

    /** One delivery thread per node. */
    DirectLink() {
        this(1);
    }

    /** {@code lanes} delivery threads per node; a queue pair's packets always take the same one. */
    DirectLink(int lanes) {
        this.lanes = lanes;
    }

    PacketTransport transportFor(String from) {
        return new PacketTransport() {
            @Override
            public void send(String peer, int laneHint, PacketBatch batch) {
                ExecutorService[] executors = inbound.get(peer);
                if (executors == null || down.contains(peer)) {
                    return;
                }
                PacketBatch[] byLane = new PacketBatch[lanes];
                for (Packet p : batch) {
                    if (!drop.test(p)) {
                        int lane = Math.floorMod(p.getDstQpn(), lanes);
                        if (byLane[lane] == null) {
                            byLane[lane] = new PacketBatch();
                        }
                        byLane[lane].addCopyOf(p);
                    }
                }
                for (int lane = 0; lane < lanes; lane++) {
                    if (byLane[lane] != null) {
                        PacketBatch delivered = byLane[lane];
                        executors[lane].execute(() -> nics.get(peer).router().receive(from, delivered));
                    }
                }
            }

            @Override
            public boolean isWritable(String peer, int laneHint) {
                return !down.contains(peer);
            }

            @Override
            public boolean reaches(String peer) {
                return !down.contains(peer);
            }

            @Override
            public java.util.Set<String> peers() {
                java.util.Set<String> others = new java.util.HashSet<>(nics.keySet());
                others.remove(from);
                return others;
            }
        };
    }

    /** Takes {@code node}'s link down (as a node that is gone): nothing reaches it until {@link #up}. */
    void down(String node) {
        down.add(node);
    }

    void up(String node) {
        down.remove(node);
    }

    void add(String node, Nic nic) {
        nics.put(node, nic);
        ExecutorService[] executors = new ExecutorService[lanes];
        for (int lane = 0; lane < lanes; lane++) {
            String name = "direct-link-" + node + (lanes == 1 ? "" : "-" + lane);
            executors[lane] = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, name);
                t.setDaemon(true);
                return t;
            });
        }
        inbound.put(node, executors);
    }

    @Override
    public void close() {
        for (ExecutorService[] executors : inbound.values()) {
            for (ExecutorService executor : executors) {
                executor.shutdownNow();
            }
        }
    }
}
