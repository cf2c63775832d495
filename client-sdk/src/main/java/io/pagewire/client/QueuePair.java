package io.pagewire.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A reliable connected queue pair to one queue pair on a peer node. Each operation returns a future
 * that completes when the NIC reports the work request finished, in posting order, or completes
 * exceptionally with a {@link PagewireException} naming what went wrong. A failed request moves the
 * queue pair to an error state, and the requests after it fail as flushed (as with RC queue pairs).
 */
public interface QueuePair extends AutoCloseable {
    int qpn();

    /** What a peer needs to connect to this queue pair. */
    QpAddress address();

    /** Connects to a queue pair on a peer node. */
    void connect(QpAddress peer);

    CompletableFuture<Void> connectAsync(QpAddress peer);

    CompletableFuture<Completion> write(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey);

    CompletableFuture<Completion> writeWithNotify(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
            int counterId);

    CompletableFuture<Completion> read(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey);

    CompletableFuture<Completion> fetchAdd(int counterId, long add);

    /** Posts several work requests in one message; one future per request, in order. */
    List<CompletableFuture<Completion>> post(List<WorkRequest> requests);

    /**
     * Waits for a completion: spinning when the connection busy-polls, sleeping otherwise.
     *
     * @throws PagewireException the request's error
     */
    Completion await(CompletableFuture<Completion> completion);

    /** Closes the queue pair; what is still posted fails as flushed. */
    @Override
    void close();
}
