package io.pagewire.tools.experiment;

import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.WorkRequest;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;

/**
 * A queue pair between an endpoint that sends and one that receives, connected both ways, with each
 * side's completion queue: what every experiment's workload runs over.
 */
record Link(QueuePair qp, CompletionQueue cq, QueuePair remoteQp, CompletionQueue remoteCq) {
    /** Connects {@code sender}, an endpoint of {@code senderNic}, to {@code receiver}, one of {@code receiverNic}. */
    static Link connect(Nic senderNic, Endpoint sender, Nic receiverNic, Endpoint receiver) {
        CompletionQueue cq = senderNic.createCompletionQueue();
        CompletionQueue remoteCq = receiverNic.createCompletionQueue();
        QueuePair qp = senderNic.createQueuePair(sender, cq);
        QueuePair remoteQp = receiverNic.createQueuePair(receiver, remoteCq);
        qp.connect(remoteQp.address());
        remoteQp.connect(qp.address());
        return new Link(qp, cq, remoteQp, remoteCq);
    }

    /**
     * Posts the requests {@code first} to {@code first + count - 1} that {@code request} builds, with
     * at most {@code depth} in flight, and waits for them all, requiring each one's success.
     *
     * @param who names the workload in a failure's message
     */
    void stream(long first, long count, int depth, LongFunction<WorkRequest> request, String who) throws InterruptedException {
        int inFlight = 0;
        for (long i = first; i < first + count; i++) {
            if (inFlight == depth) {
                reap(who);
                inFlight--;
            }
            qp.post(request.apply(i));
            inFlight++;
        }
        for (; inFlight > 0; inFlight--) {
            reap(who);
        }
    }

    private void reap(String who) throws InterruptedException {
        Completion done = cq.take(60, TimeUnit.SECONDS);
        if (done == null || !done.ok()) {
            throw new IllegalStateException(who + ": a request " + (done == null ? "did not complete within 60 s" : "failed: " + done.error()));
        }
    }
}
