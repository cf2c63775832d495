package io.pagewire.tools.experiment;

import io.pagewire.client.ConnectOptions;
import java.util.List;

/**
 * How to run an experiment: the seed of every random choice in it (access patterns, RANDOM TLB
 * replacement), so that a run can be repeated; whether to run it at a reduced size (what the test
 * suite runs) instead of its default one; and the running cluster to run it against, or null to
 * start nodes of its own in this JVM.
 */
public record ExperimentSettings(long seed, boolean reduced, RunningCluster cluster) {
    /** Settings for a run on nodes the experiment starts itself. */
    public ExperimentSettings(long seed, boolean reduced) {
        this(seed, reduced, null);
    }

    /**
     * Two nodes of a cluster that is already running: the experiment's first application connects to
     * {@code requester}, its second to {@code responder}, with {@code options}. The experiments that
     * run stock verbs programs run them on this host, beside the nodes, or, given the two nodes'
     * {@code containers} (the requester's first), inside them with the image's library.
     */
    public record RunningCluster(String requester, String responder, ConnectOptions options, List<String> containers) {
        public RunningCluster {
            containers = List.copyOf(containers);
            if (!containers.isEmpty() && containers.size() != 2) {
                throw new IllegalArgumentException("give the containers of both nodes (the requester's, then the responder's), was " + containers);
            }
        }

        /** Two nodes whose verbs programs run on this host. */
        public RunningCluster(String requester, String responder, ConnectOptions options) {
            this(requester, responder, options, List.of());
        }
    }
}
