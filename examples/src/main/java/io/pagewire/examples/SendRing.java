package io.pagewire.examples;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The sibling of {@link NotifyRing} in two-sided messaging: the token goes around the ring as SENDs.
 * Each member keeps a receive posted in its inbox; the previous member SENDs the message (with the
 * round as immediate data), the receive completes with the byte count once the message is in place,
 * and the member checks it, posts its next receive and passes the token on. No member needs to know
 * another's buffer addresses or keys, only its queue pair, as with U-Net's send and receive queues.
 *
 * <pre>
 *   java -cp tools/target/pagewire.jar io.pagewire.examples.SendRing \
 *       localhost:7101 localhost:7102 localhost:7103 --rounds 100 --size 8192 --mode ON_DEMAND
 * </pre>
 */
public final class SendRing {
    private SendRing() {
    }

    public static void main(String[] args) {
        RingArguments arguments = RingArguments.parse("SendRing", args);
        if (arguments == null) {
            System.exit(2);
        }
        RingArguments.print(run(arguments.targets(), arguments.rounds(), arguments.size(), arguments.mode()));
    }

    /** Runs the ring over the given nodes (one member per node) and checks every message on arrival. */
    public static NotifyRing.Result run(List<String> targets, int rounds, int size, RegistrationMode mode) {
        return run(targets, rounds, size, mode, ConnectOptions.defaults());
    }

    /** The same, connecting with the given options (certificates, token) instead of the environment's. */
    public static NotifyRing.Result run(List<String> targets, int rounds, int size, RegistrationMode mode, ConnectOptions options) {
        if (size < 24) {
            throw new IllegalArgumentException("messages need at least 24 bytes (round, hop, checksum), was " + size);
        }
        int n = targets.size();
        List<Pagewire> nodes = new ArrayList<>();
        try {
            List<Endpoint> members = new ArrayList<>();
            for (String target : targets) {
                Pagewire node = Pagewire.connect(target, options);
                nodes.add(node);
                members.add(node.openEndpoint("send-ring-member-" + nodes.size()));
            }
            List<MemoryRegion> inboxes = new ArrayList<>();
            List<MemoryRegion> outboxes = new ArrayList<>();
            for (Endpoint member : members) {
                inboxes.add(member.register(member.allocate(size), size, mode, EnumSet.of(Access.LOCAL_WRITE)));
                outboxes.add(member.register(member.allocate(size), size, mode, EnumSet.of(Access.LOCAL_WRITE)));
            }
            // Member i sends on toNext[i]; member i+1 receives on fromPrevious[i+1], its end of the same pair.
            List<QueuePair> toNext = new ArrayList<>();
            List<QueuePair> fromPrevious = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                toNext.add(members.get(i).createQueuePair());
                fromPrevious.add(members.get(i).createQueuePair());
            }
            List<CompletableFuture<Completion>> inboxReceives = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                QueuePair sender = toNext.get(i);
                QueuePair receiver = fromPrevious.get((i + 1) % n);
                sender.connect(receiver.address());
                receiver.connect(sender.address());
            }
            for (int i = 0; i < n; i++) {
                inboxReceives.add(fromPrevious.get(i).postReceive(inboxes.get(i), inboxes.get(i).address(), size));
            }

            HopTimes times = new HopTimes();
            for (int round = 0; round < rounds; round++) {
                for (int hop = 0; hop < n; hop++) {
                    int from = hop;
                    int to = (hop + 1) % n;
                    long start = System.nanoTime();
                    byte[] message = NotifyRing.message(round, hop, size);
                    members.get(from).store(outboxes.get(from).address(), message);
                    QueuePair qp = toNext.get(from);
                    qp.await(qp.sendWithImm(outboxes.get(from), outboxes.get(from).address(), size, round));
                    Completion received = fromPrevious.get(to).await(inboxReceives.get(to));
                    if (received.bytes() != size || !received.hasImmediate() || received.immediate() != round) {
                        throw new IllegalStateException("member " + to + " received " + received + " in round " + round + ", hop " + hop);
                    }
                    byte[] landed = members.get(to).load(inboxes.get(to).address(), size);
                    if (!Arrays.equals(landed, message)) {
                        throw new IllegalStateException("member " + to + " received a corrupt message in round " + round + ", hop " + hop);
                    }
                    // Ready for the next round before the token moves on.
                    inboxReceives.set(to, fromPrevious.get(to).postReceive(inboxes.get(to), inboxes.get(to).address(), size));
                    times.hopEnded(start);
                }
            }
            return times.result(n, rounds);
        } finally {
            nodes.forEach(Pagewire::close);
        }
    }
}
