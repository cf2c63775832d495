package io.pagewire.node.experiment;

/**
 * How to run an experiment: the seed of every random choice in it (access patterns, RANDOM TLB
 * replacement), so that a run can be repeated, and whether to run it at a reduced size (what the
 * test suite runs) instead of its default one.
 */
public record ExperimentSettings(long seed, boolean reduced) {
}
