package io.pagewire.node.experiment;

import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.QueuePair;

/**
 * A queue pair between an endpoint that sends and one that receives, connected both ways, with each
 * side's completion queue: what every experiment's workload runs over.
 */
record Link(QueuePair qp, CompletionQueue cq, QueuePair remoteQp, CompletionQueue remoteCq) {
    /** Connects {@code sender} (its node's NIC) to {@code receiver} (its own). */
    static Link connect(Endpoint sender, Endpoint receiver) {
        CompletionQueue cq = sender.nic().createCompletionQueue();
        CompletionQueue remoteCq = receiver.nic().createCompletionQueue();
        QueuePair qp = sender.nic().createQueuePair(sender, cq);
        QueuePair remoteQp = receiver.nic().createQueuePair(receiver, remoteCq);
        qp.connect(remoteQp.address());
        remoteQp.connect(qp.address());
        return new Link(qp, cq, remoteQp, remoteCq);
    }
}
