package io.pagewire.node.experiment;

import java.io.PrintWriter;
import java.util.Optional;

/**
 * One experiment that reproduces a research system's result on Pagewire: it runs a workload, and
 * returns its measurements beside the paper's claims, each judged reproduced or not.
 */
public interface Experiment {
    /** The name {@code pagewire experiment NAME} takes. */
    String name();

    /** The paper and the result of it this experiment reproduces, in a sentence or two. */
    String paper();

    /**
     * Why this experiment must start the nodes it runs on (it configures them, or reads their
     * internals), or empty when it also runs against a running cluster's nodes.
     */
    default Optional<String> needsOwnNodes() {
        return Optional.empty();
    }

    /**
     * Runs the experiment.
     *
     * @param progress where to say what is running (one line per step)
     */
    ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception;
}
