package io.pagewire.examples;

import io.pagewire.client.RegistrationMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The command line the ring examples share: node addresses, then {@code --rounds}, {@code --size}, {@code --mode}. */
record RingArguments(List<String> targets, int rounds, int size, RegistrationMode mode) {
    /** Parses the arguments, or returns null after printing the usage of {@code example}. */
    static RingArguments parse(String example, String[] args) {
        List<String> targets = new ArrayList<>();
        int rounds = 100;
        int size = 8192;
        RegistrationMode mode = RegistrationMode.PINNED;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rounds" -> rounds = Integer.parseInt(args[++i]);
                case "--size" -> size = Integer.parseInt(args[++i]);
                case "--mode" -> mode = RegistrationMode.valueOf(args[++i].toUpperCase(Locale.ROOT));
                default -> targets.add(args[i]);
            }
        }
        if (targets.size() < 2) {
            System.err.println("usage: " + example + " HOST:PORT HOST:PORT [HOST:PORT...] [--rounds N] [--size BYTES] [--mode MODE]");
            return null;
        }
        return new RingArguments(targets, rounds, size, mode);
    }

    /** Prints what a ring run measured. */
    static void print(NotifyRing.Result result) {
        System.out.printf(Locale.ROOT, "ring of %d members, %d rounds: %d hops, %.1f us per hop on average, %.1f us the median, %.1f us at most%n",
                result.members(), result.rounds(), result.hops(), result.averageHopMicros(), result.medianHopMicros(), result.maxHopMicros());
    }
}
