package io.pagewire.client.impl;

import io.pagewire.client.Opcode;
import java.util.ArrayDeque;

/**
 * The post order of one queue pair, and its unsignalled requests waiting for a later completion to
 * imply theirs. A reliable connection completes a queue pair's requests in the order they were
 * posted, so a completion for request {@code w} means every earlier request of that queue pair is
 * done; those that asked for no completion of their own succeeded (a failure always completes).
 *
 * <p>Work request ids are taken and written to the node under {@link #postLock}, so that on one
 * queue pair a smaller id was posted earlier: that is what lets an id stand for a position. The
 * waiting requests have a lock of their own, because a post may wait for room on a full ring while
 * completions must still be taken off the other ring.
 */
final class PostOrder {
    /** Told of each unsignalled request that a later completion implies. */
    interface Implied {
        void succeeded(long wrId, int qpn, Opcode opcode, int length);
    }

    private record Silent(long wrId, Opcode opcode, int length) {
    }

    /** Held while a post takes its ids and hands its requests to the node. */
    final Object postLock = new Object();
    private final int qpn;
    private final ArrayDeque<Silent> silent = new ArrayDeque<>();

    PostOrder(int qpn) {
        this.qpn = qpn;
    }

    /** Records an unsignalled request; call under {@link #postLock}, in post order. */
    synchronized void unsignaled(long wrId, Opcode opcode, int length) {
        silent.addLast(new Silent(wrId, opcode, length));
    }

    /** A completion for {@code wrId} arrived: every unsignalled request posted before it succeeded. */
    void completed(long wrId, Implied implied) {
        while (true) {
            Silent s;
            synchronized (this) {
                s = silent.peekFirst();
                if (s == null || s.wrId > wrId) {
                    return;
                }
                silent.removeFirst();
            }
            if (s.wrId < wrId) {
                implied.succeeded(s.wrId, qpn, s.opcode, s.length);
            }
        }
    }
}
