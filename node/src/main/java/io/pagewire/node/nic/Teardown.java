package io.pagewire.node.nic;

/**
 * Runs every step of a teardown whatever the earlier steps threw, then throws the first failure
 * with the later ones suppressed: a close that stopped at its first error would leave the rest of
 * what it owns (pins, frames, regions) held for good.
 */
final class Teardown {
    private RuntimeException first;

    /** Runs one step, keeping its failure for {@link #finish}. */
    void run(Runnable step) {
        try {
            step.run();
        } catch (RuntimeException e) {
            if (first == null) {
                first = e;
            } else {
                first.addSuppressed(e);
            }
        }
    }

    /** Throws the first failure of the steps run, if any. */
    void finish() {
        if (first != null) {
            throw first;
        }
    }
}
