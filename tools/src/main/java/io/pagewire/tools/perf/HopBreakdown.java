package io.pagewire.tools.perf;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where the time of one message of a ping-pong goes, hop by hop, from the hop traces of its two programs
 * (the verbs library's, {@code PAGEWIRE_VERBS_HOP_TRACE}) and their two nodes ({@code pagewire.node.hopTraceFile}):
 * each SEND is followed from the sending program's post through its node's ring reader, its NIC, the gRPC lane,
 * the peer node's NIC and event ring to the peer program's poll, and each hop's median and 90th percentile
 * is taken over the messages of both directions. All four traces read the host's CLOCK_MONOTONIC, so their
 * moments compare directly; a message whose steps do not line up before the next post of its sender (a
 * retransmission, say) is counted as unmatched and left out.
 */
public final class HopBreakdown {
    /** Which of the four traces a step is read from: the sender's or the receiver's program or node. */
    enum Side {
        SENDER,
        SENDER_NODE,
        RECEIVER_NODE,
        RECEIVER
    }

    /** One step of a message's way: the event that ends the hop, and what the hop is. */
    record Step(Side side, String hop, String what) {
    }

    /** The steps of one SEND, from the sender's post to the receiver's poll. */
    static final List<Step> SEND = List.of(
            new Step(Side.SENDER, "APP_POST_SEND", "the program posts (ibv_post_send)"),
            new Step(Side.SENDER_NODE, "POST_READ", "the library writes the post record; the node's loop reads it from the ring"),
            new Step(Side.SENDER_NODE, "LANE_SEND_REQUEST", "the NIC's requester: checks, translation, copy, packet built, handed to the lane"),
            new Step(Side.RECEIVER_NODE, "LANE_RECEIVE_REQUEST", "the gRPC lane: framing, HTTP/2, TCP loopback, the peer loop's read, parse"),
            new Step(Side.RECEIVER_NODE, "COMPLETION_WRITTEN", "the peer NIC's responder: PSN, placement, completion record on the event ring"),
            new Step(Side.RECEIVER, "APP_CQ_PUSH", "the peer library takes the record from the event ring into its CQ"),
            new Step(Side.RECEIVER, "APP_POLL_COMPLETION", "the peer program's poll returns it"));
    /** How many hops a SEND's way has (its steps less the post it starts from). */
    public static final int SEND_HOPS = SEND.size() - 1;

    /** One process's trace: its events' moments per hop name, in order, and the thread of each. */
    static final class Trace {
        private static final Pattern NODE = Pattern.compile("node (\\S+), pid \\d+;.*");
        private static final Pattern PROGRAM = Pattern.compile("program .*, pid \\d+, on node (\\S+);.*");
        private static final Pattern ALLOCATED = Pattern.compile("# thread \\S+ allocated (\\d+) bytes since its first mark");

        final String description;
        /** The node traced, or the node the program posted on; null for a program that opened no device. */
        final String node;
        final boolean program;
        /** What the node's threads that marked allocated on the heap while traced (0 for a program's trace). */
        long allocatedBytes;
        private final Map<String, long[]> times = new HashMap<>();
        private final Map<String, String[]> threads = new HashMap<>();

        private Trace(String description) {
            this.description = description;
            Matcher n = NODE.matcher(description);
            Matcher p = PROGRAM.matcher(description);
            this.program = p.matches();
            this.node = program ? (p.group(1).equals("(none)") ? null : p.group(1)) : n.matches() ? n.group(1) : null;
        }

        /** Reads a trace file as the node and the library write it ("NANOS HOP THREAD" lines, '#' comments). */
        static Trace read(Path file) {
            List<String> lines;
            try {
                lines = Files.readAllLines(file);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read the hop trace " + file + ": " + e.getMessage(), e);
            }
            String description = lines.isEmpty() || !lines.get(0).startsWith("# pagewire hop trace: ") ? null
                    : lines.get(0).substring("# pagewire hop trace: ".length());
            if (description == null) {
                throw new IllegalArgumentException(file + " is not a hop trace (its first line is not \"# pagewire hop trace: ...\")");
            }
            record Event(long ns, String thread) {
            }
            Map<String, List<Event>> byHop = new HashMap<>();
            long allocated = 0;
            for (int n = 1; n < lines.size(); n++) {
                String line = lines.get(n);
                Matcher a = ALLOCATED.matcher(line);
                if (a.matches()) {
                    allocated += Long.parseLong(a.group(1));
                    continue;
                }
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                String[] f = line.split(" ");
                if (f.length != 3) {
                    throw new IllegalArgumentException(file + " line " + (n + 1) + " is not \"NANOS HOP THREAD\": " + line);
                }
                try {
                    byHop.computeIfAbsent(f[1], h -> new ArrayList<>()).add(new Event(Long.parseLong(f[0]), f[2]));
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException(file + " line " + (n + 1) + ": " + f[0] + " is not a number of nanoseconds", e);
                }
            }
            Trace trace = new Trace(description);
            trace.allocatedBytes = allocated;
            byHop.forEach((hop, events) -> {
                events.sort((x, y) -> Long.compare(x.ns(), y.ns())); // threads' events interleave slightly out of order
                trace.times.put(hop, events.stream().mapToLong(Event::ns).toArray());
                trace.threads.put(hop, events.stream().map(Event::thread).toArray(String[]::new));
            });
            return trace;
        }

        long[] times(String hop) {
            return times.getOrDefault(hop, new long[0]);
        }

        /** The index of the first event of {@code hop} at or after {@code ns}, or -1. */
        int firstAtOrAfter(String hop, long ns) {
            long[] t = times(hop);
            int i = Arrays.binarySearch(t, ns);
            if (i < 0) {
                i = -i - 1;
            } else {
                while (i > 0 && t[i - 1] == ns) {
                    i--;
                }
            }
            return i < t.length ? i : -1;
        }

        /** Whether an event of {@code hop} lies in [from, to]. */
        boolean anyBetween(String hop, long from, long to) {
            int i = firstAtOrAfter(hop, from);
            return i >= 0 && times(hop)[i] <= to;
        }

        String thread(String hop, int index) {
            return threads.get(hop)[index];
        }
    }

    /** Per hop, its median and 90th percentile in microseconds, over the matched messages. */
    public record Hop(String what, double medianUs, double p90Us) {
    }

    /**
     * The result: per hop the figures, the whole one-way's, how many messages were matched and left out,
     * and how often a message met a sleeping node loop, a sleeping program, or a completion taken from the
     * ring by another thread than the one that polled it (the library's reader thread).
     */
    public record Result(List<Hop> hops, double oneWayMedianUs, double oneWayP90Us, int matched, int unmatched, double nodeAsleepShare,
            double programAsleepShare, double drainedElsewhereShare, double nodeBytesPerMessage) {
        /** A Markdown table of the hops, then the shares. */
        public String table() {
            StringBuilder b = new StringBuilder("| hop | median us | p90 us |\n|---|---:|---:|\n");
            for (Hop h : hops) {
                b.append(String.format(Locale.ROOT, "| %s | %.1f | %.1f |%n", h.what(), h.medianUs(), h.p90Us()));
            }
            b.append(String.format(Locale.ROOT, "| **one way, post to poll** | **%.1f** | **%.1f** |%n", oneWayMedianUs, oneWayP90Us));
            b.append(String.format(Locale.ROOT,
                    "%nOver %,d messages (%,d left out unmatched): the sender's node loop was asleep at the post (the library rang its bell) for %.0f%%;"
                            + " the receiving program was asleep on its bell for %.0f%%; the completion was taken from the ring by another thread than"
                            + " the poller's for %.0f%%.%n",
                    matched, unmatched, 100 * nodeAsleepShare, 100 * programAsleepShare, 100 * drainedElsewhereShare));
            if (nodeBytesPerMessage >= 0) {
                b.append(String.format(Locale.ROOT, "The nodes' threads allocated %,.0f bytes on the heap per message they carried (sent or"
                        + " received, over the nodes' whole trace, warm-up included).%n", nodeBytesPerMessage));
            }
            return b.toString();
        }
    }

    private HopBreakdown() {
    }

    /**
     * Follows every SEND of a ping-pong whose traces are in {@code directory} (the {@code .hops} files of two
     * nodes and of two programs that posted on them, one on each), both ways, skipping each sender's first
     * {@code skip} posts (the warm-up; negative: a tenth of them).
     */
    public static Result ofPingPong(Path directory, int skip) {
        Map<String, Trace> nodes = new HashMap<>();
        Map<String, Trace> programs = new HashMap<>();
        List<Path> files;
        try (var listing = Files.list(directory)) {
            files = listing.filter(f -> f.getFileName().toString().endsWith(".hops")).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + directory + ": " + e.getMessage(), e);
        }
        for (Path file : files) {
            Trace t = Trace.read(file);
            if (t.node != null && !t.program) {
                nodes.put(t.node, t);
            } else if (t.node != null && t.times(SEND.get(0).hop()).length > 0) {
                if (programs.put(t.node, t) != null) {
                    throw new IllegalArgumentException(directory + " holds the traces of two programs that posted on node " + t.node
                            + ": a ping-pong has one program on each of two nodes");
                }
            }
        }
        if (programs.size() != 2 || !nodes.keySet().containsAll(programs.keySet())) {
            throw new IllegalArgumentException(directory + " does not hold the traces of two programs that posted on two nodes and of those"
                    + " nodes (programs on " + programs.keySet() + ", nodes " + nodes.keySet() + ")");
        }
        List<String> ids = programs.keySet().stream().sorted().toList();
        return ofPingPong(programs.get(ids.get(0)), nodes.get(ids.get(0)), nodes.get(ids.get(1)), programs.get(ids.get(1)), skip);
    }

    private static Result ofPingPong(Trace a, Trace na, Trace nb, Trace b, int skip) {
        List<long[]> chains = new ArrayList<>();
        int[] unmatched = new int[1];
        int[] flags = new int[3];
        follow(new Trace[] {a, na, nb, b}, skip, chains, unmatched, flags);
        follow(new Trace[] {b, nb, na, a}, skip, chains, unmatched, flags);
        if (chains.isEmpty()) {
            throw new IllegalArgumentException("no message could be followed from post to poll in these traces (" + a.description + "; "
                    + b.description + "): were both programs and both nodes traced in the same run?");
        }
        List<Hop> hops = new ArrayList<>();
        for (int s = 1; s < SEND.size(); s++) {
            double[] gaps = new double[chains.size()];
            for (int c = 0; c < gaps.length; c++) {
                gaps[c] = (chains.get(c)[s] - chains.get(c)[s - 1]) / 1000.0;
            }
            hops.add(new Hop(SEND.get(s).what(), percentile(gaps, 0.5), percentile(gaps, 0.9)));
        }
        double[] total = new double[chains.size()];
        for (int c = 0; c < total.length; c++) {
            long[] chain = chains.get(c);
            total[c] = (chain[chain.length - 1] - chain[0]) / 1000.0;
        }
        double n = chains.size();
        long carried = na.times("POST_READ").length + na.times("LANE_RECEIVE_REQUEST").length + nb.times("POST_READ").length
                + nb.times("LANE_RECEIVE_REQUEST").length;
        double perMessage = carried == 0 || na.allocatedBytes + nb.allocatedBytes == 0 ? -1 : (double) (na.allocatedBytes + nb.allocatedBytes) / carried;
        return new Result(hops, percentile(total, 0.5), percentile(total, 0.9), chains.size(), unmatched[0], flags[0] / n, flags[1] / n,
                flags[2] / n, perMessage);
    }

    /** Follows each post of {@code sides[0]} through the other traces; adds the matched chains' moments. */
    private static void follow(Trace[] sides, int skip, List<long[]> chains, int[] unmatched, int[] flags) {
        Trace sender = sides[Side.SENDER.ordinal()];
        long[] posts = sender.times(SEND.get(0).hop());
        for (int p = skip < 0 ? posts.length / 10 : skip; p < posts.length; p++) {
            long limit = p + 1 < posts.length ? posts[p + 1] : Long.MAX_VALUE;
            long[] chain = new long[SEND.size()];
            chain[0] = posts[p];
            int receiverPush = -1;
            int receiverPoll = -1;
            boolean ok = true;
            for (int s = 1; s < SEND.size() && ok; s++) {
                Step step = SEND.get(s);
                Trace trace = sides[step.side().ordinal()];
                int i = trace.firstAtOrAfter(step.hop(), chain[s - 1]);
                ok = i >= 0 && trace.times(step.hop())[i] < limit;
                if (ok) {
                    chain[s] = trace.times(step.hop())[i];
                    if (step.hop().equals("APP_CQ_PUSH")) {
                        receiverPush = i;
                    } else if (step.hop().equals("APP_POLL_COMPLETION")) {
                        receiverPoll = i;
                    }
                }
            }
            if (!ok) {
                unmatched[0]++;
                continue;
            }
            chains.add(chain);
            Trace receiver = sides[Side.RECEIVER.ordinal()];
            if (sender.anyBetween("APP_RANG_NODE", chain[0], chain[1])) {
                flags[0]++;
            }
            if (sides[Side.RECEIVER_NODE.ordinal()].anyBetween("BELL_RUNG", chain[4], chain[5]) || receiver.anyBetween("APP_POLL_WAKE", chain[4], chain[6])) {
                flags[1]++;
            }
            if (!receiver.thread("APP_CQ_PUSH", receiverPush).equals(receiver.thread("APP_POLL_COMPLETION", receiverPoll))) {
                flags[2]++;
            }
        }
    }

    private static double percentile(double[] values, double q) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int i = (int) Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
        return sorted[i];
    }
}
