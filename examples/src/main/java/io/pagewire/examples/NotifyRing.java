package io.pagewire.examples;

import io.pagewire.client.Access;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.zip.CRC32;

/**
 * An example distributed test application: a ring of writers that each notify the next. One endpoint
 * per node; a token (a message carrying its round and hop and a checksum of its payload) goes around
 * the ring: each member waits for its event counter to move (the previous member's WRITE_WITH_NOTIFY),
 * checks the message that landed in its buffer, and passes it on to the next member the same way.
 *
 * <pre>
 *   java -cp tools/target/pagewire.jar io.pagewire.examples.NotifyRing \
 *       localhost:7101 localhost:7102 localhost:7103 --rounds 100 --size 8192 --mode SHADOW
 * </pre>
 */
public final class NotifyRing {
    /** What a run of the ring measured. */
    public record Result(int members, int rounds, long hops, double averageHopMicros, double medianHopMicros, double maxHopMicros) {
    }

    private NotifyRing() {
    }

    public static void main(String[] args) {
        RingArguments arguments = RingArguments.parse("NotifyRing", args);
        if (arguments == null) {
            System.exit(2);
        }
        RingArguments.print(run(arguments.targets(), arguments.rounds(), arguments.size(), arguments.mode()));
    }

    /** Runs the ring over the given nodes (one member per node) and checks every message on arrival. */
    public static Result run(List<String> targets, int rounds, int size, RegistrationMode mode) {
        return run(targets, rounds, size, mode, ConnectOptions.defaults());
    }

    /** The same, connecting with the given options (certificates, token) instead of the environment's. */
    public static Result run(List<String> targets, int rounds, int size, RegistrationMode mode, ConnectOptions options) {
        if (size < 24) {
            throw new IllegalArgumentException("messages need at least 24 bytes (round, hop, checksum), was " + size);
        }
        int n = targets.size();
        List<Pagewire> nodes = new ArrayList<>();
        List<Endpoint> members = new ArrayList<>();
        try {
            for (String target : targets) {
                Pagewire node = Pagewire.connect(target, options);
                nodes.add(node);
                members.add(node.openEndpoint("ring-member-" + nodes.size()));
            }
            // Each member: an inbox peers write into, an outbox it sends from, a counter peers notify.
            List<MemoryRegion> inboxes = new ArrayList<>();
            List<MemoryRegion> outboxes = new ArrayList<>();
            List<EventCounter> counters = new ArrayList<>();
            for (Endpoint member : members) {
                inboxes.add(member.register(member.allocate(size), size, mode, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE)));
                outboxes.add(member.register(member.allocate(size), size, mode, EnumSet.of(Access.LOCAL_WRITE)));
                counters.add(member.createEventCounter(EnumSet.of(Access.REMOTE_WRITE)));
            }
            List<QueuePair> toNext = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                toNext.add(members.get(i).connect(members.get((i + 1) % n)));
            }

            HopTimes times = new HopTimes();
            for (int round = 0; round < rounds; round++) {
                for (int hop = 0; hop < n; hop++) {
                    int from = hop;
                    int to = (hop + 1) % n;
                    long start = System.nanoTime();
                    byte[] message = message(round, hop, size);
                    members.get(from).store(outboxes.get(from).address(), message);
                    QueuePair qp = toNext.get(from);
                    qp.await(qp.writeWithNotify(outboxes.get(from), outboxes.get(from).address(), size, inboxes.get(to).address(),
                            inboxes.get(to).rkey(), counters.get(to).id()));
                    // The next member waits for its counter, then checks what landed: the data is visible before the notification.
                    long expected = round + 1;
                    long seen = counters.get(to).await(expected, Duration.ofSeconds(30));
                    if (seen < expected) {
                        throw new IllegalStateException("member " + to + " was not notified of round " + round + " within 30 s");
                    }
                    byte[] landed = members.get(to).load(inboxes.get(to).address(), size);
                    if (!Arrays.equals(landed, message)) {
                        throw new IllegalStateException("member " + to + " received a corrupt message in round " + round + ", hop " + hop);
                    }
                    times.hopEnded(start);
                }
            }
            return times.result(n, rounds);
        } finally {
            nodes.forEach(Pagewire::close);
        }
    }

    /** Round, hop, a CRC of the payload, then the payload. */
    static byte[] message(int round, int hop, int size) {
        byte[] bytes = new byte[size];
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        buffer.putLong(round).putLong(hop);
        for (int i = 24; i < size; i++) {
            bytes[i] = (byte) (round * 31 + hop * 7 + i);
        }
        CRC32 crc = new CRC32();
        crc.update(bytes, 24, size - 24);
        buffer.putLong(16, crc.getValue());
        return bytes;
    }
}
