package io.pagewire.tools.experiment;

import java.io.PrintWriter;

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
     * Runs the experiment: on nodes it starts and configures itself, or, when the settings name a
     * running cluster, through the SDK against two of its nodes, sized from what they report.
     *
     * @param progress where to say what is running (one line per step)
     */
    ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception;
}
