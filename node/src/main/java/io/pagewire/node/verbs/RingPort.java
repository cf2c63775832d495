package io.pagewire.node.verbs;

import io.pagewire.client.impl.SessionRings;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.WorkRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiConsumer;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.ringbuffer.RingBuffer;

/**
 * User-level access for applications on the node's host: it creates each session's rings in shared
 * memory (a file in the ring directory) and runs the one duty-cycle agent that reads every active
 * session's request ring and posts what it finds, as Aeron's media driver reads its clients'
 * command buffers. Completions and counter changes go back on the sessions' event rings from
 * whichever thread produced them.
 *
 * <p>The agent idles with a back-off: it spins, then yields, then parks up to {@code maxParkNs}; in
 * latency mode the park is short, so a post is picked up within microseconds without a core spent
 * for ever on an idle node.
 */
final class RingPort implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(RingPort.class.getName());
    /** Posts taken from one session's ring before the agent moves to the next session. */
    private static final int POSTS_PER_TURN = 64;

    private final String nodeId;
    private final Path directory;
    private final int ringBytes;
    private final long maxParkNs;
    private final BiConsumer<Session, Post> poster;
    private final SecureRandom random = new SecureRandom();
    private final List<Session> active = new CopyOnWriteArrayList<>();
    private AgentRunner runner;

    /** One decoded POST record. */
    record Post(int qpn, List<WorkRequest> requests) {
    }

    /**
     * @param directory where ring files are made; null turns user-level access off
     * @param poster posts a decoded record on the session's queue pair (the verbs service's post path)
     */
    RingPort(String nodeId, Path directory, int ringBytes, long maxParkNs, BiConsumer<Session, Post> poster) {
        this.nodeId = nodeId;
        this.directory = directory;
        this.ringBytes = ringBytes;
        this.maxParkNs = maxParkNs;
        this.poster = poster;
    }

    /** Creates a session's ring file; throws with the reason when the node offers no rings. */
    SessionRings create(Endpoint endpoint) {
        if (directory == null) {
            throw new IllegalStateException("node " + nodeId + " offers no shared-memory rings (pagewire.node.ringDirectory is empty)");
        }
        if (!Files.isDirectory(directory) || !Files.isWritable(directory)) {
            throw new IllegalStateException("node " + nodeId + " cannot make rings in " + directory + ": not a writable directory");
        }
        String name = "pagewire-" + nodeId.replaceAll("[^A-Za-z0-9_.-]", "_") + "-" + endpoint.id() + "-"
                + Long.toHexString(random.nextLong()) + ".rings";
        return SessionRings.create(directory.resolve(name), ringBytes, random.nextLong());
    }

    /** Starts reading a session's request ring (and the agent, at the first session). */
    synchronized void activate(Session session) {
        active.add(session);
        if (runner == null) {
            IdleStrategy idle = new BackoffIdleStrategy(100, 100, 1_000, maxParkNs);
            runner = new AgentRunner(idle, error -> LOG.log(System.Logger.Level.WARNING, "the ring agent of node " + nodeId + " failed", error),
                    null, new Reader());
            AgentRunner.startOnThread(runner, r -> {
                Thread t = new Thread(r, "pagewire-rings-" + nodeId);
                t.setDaemon(true);
                return t;
            });
        }
    }

    /** Stops reading a session's ring and deletes its file (the mapping goes when nothing refers to it). */
    void release(Session session, SessionRings rings) {
        active.remove(session);
        rings.deleteFile();
    }

    @Override
    public synchronized void close() {
        if (runner != null) {
            runner.close();
            runner = null;
        }
    }

    /** The duty cycle: one turn over every active session's request ring. */
    private final class Reader implements Agent {
        @Override
        public int doWork() {
            int work = 0;
            for (Session session : active) {
                SessionRings rings = session.rings();
                if (rings == null) {
                    continue;
                }
                RingBuffer requests = rings.requests();
                work += requests.read((type, buffer, offset, length) -> {
                    if (type != SessionRings.POST) {
                        return;
                    }
                    List<WorkRequest> requestsRead = RingCodec.decodePost(buffer, offset, length);
                    if (requestsRead == null) {
                        LOG.log(System.Logger.Level.WARNING, "a malformed post record of " + length + " bytes on " + session.endpoint + " was dropped");
                        return;
                    }
                    poster.accept(session, new Post(RingCodec.qpnOfPost(buffer, offset), requestsRead));
                }, POSTS_PER_TURN);
            }
            return work;
        }

        @Override
        public String roleName() {
            return "pagewire-rings-" + nodeId;
        }
    }
}
