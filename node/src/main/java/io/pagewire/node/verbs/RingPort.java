package io.pagewire.node.verbs;

import io.pagewire.client.impl.RingIdler;
import io.pagewire.client.impl.SessionRings;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.WorkRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;

/**
 * User-level access for applications on the node's host: it creates each session's rings in shared
 * memory (a file in the ring directory) and runs the one duty-cycle agent that reads every active
 * session's request ring and posts what it finds, as Aeron's media driver reads its clients'
 * command buffers. Completions and counter changes go back on the sessions' event rings from
 * whichever thread produced them.
 *
 * <p>An idle agent spins briefly (in latency mode for {@code pagewire.node.busyPollNs}), naps for a
 * couple of milliseconds, then marks itself asleep in every ring's header and sleeps; an application
 * that posts to a sleeping agent rings its doorbell (a message on its session stream). See
 * {@link RingIdler}.
 */
final class RingPort implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(RingPort.class.getName());
    /** Posts taken from one session's ring before the agent moves to the next session. */
    private static final int POSTS_PER_TURN = 64;

    private final String nodeId;
    private final Path directory;
    private final int ringBytes;
    private final BiConsumer<Session, Post> poster;
    private final SecureRandom random = new SecureRandom();
    private final List<Session> active = new CopyOnWriteArrayList<>();
    /** How long the agent spins on empty rings before it sleeps. */
    private final long spinNs;
    private volatile Thread agent;
    private volatile boolean running = true;
    /** How long the agent naps between looks before it goes to sleep and wants a doorbell. */
    private static final long NAP_NS = 2_000_000L;

    /** One decoded POST record. */
    record Post(int qpn, List<WorkRequest> requests) {
    }

    /**
     * @param directory where ring files are made; null turns user-level access off
     * @param poster posts a decoded record on the session's queue pair (the verbs service's post path)
     */
    RingPort(String nodeId, Path directory, int ringBytes, long spinNs, BiConsumer<Session, Post> poster) {
        this.nodeId = nodeId;
        this.directory = directory;
        this.ringBytes = ringBytes;
        this.spinNs = spinNs;
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
        if (agent == null) {
            Thread t = new Thread(this::run, "pagewire-rings-" + nodeId);
            t.setDaemon(true);
            agent = t;
            t.start();
        }
    }

    /** A doorbell from an application: the agent looks at the rings now. */
    void wake() {
        Thread t = agent;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    /** Stops reading a session's ring and deletes its file (the mapping goes when nothing refers to it). */
    void release(Session session, SessionRings rings) {
        active.remove(session);
        rings.deleteFile();
    }

    @Override
    public synchronized void close() {
        running = false;
        Thread t = agent;
        if (t != null) {
            LockSupport.unpark(t);
            try {
                t.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            agent = null;
        }
    }

    /** The duty cycle: read every ring; when they stay empty, idle as {@link RingIdler} says. */
    private void run() {
        RingIdler idler = new RingIdler(spinNs, NAP_NS);
        RingIdler.Agent self = new RingIdler.Agent() {
            @Override
            public void asleep(boolean value) {
                for (Session session : active) {
                    SessionRings rings = session.rings();
                    if (rings != null) {
                        rings.nodeAsleep(value);
                    }
                }
            }

            @Override
            public int poll() {
                return doWork();
            }
        };
        while (running) {
            int work;
            try {
                work = doWork();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "the ring agent of node " + nodeId + " failed a turn", e);
                work = 0;
            }
            if (work > 0) {
                idler.reset();
            } else {
                idler.idle(self);
            }
        }
    }

    /** One turn over every active session's request ring. */
    private int doWork() {
        int work = 0;
        for (Session session : active) {
            SessionRings rings = session.rings();
            if (rings == null) {
                continue;
            }
            work += rings.requests().read((type, buffer, offset, length) -> {
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
}
