package io.pagewire.node.verbs;

import io.pagewire.client.impl.RingBell;
import io.pagewire.client.impl.RingIdler;
import io.pagewire.client.impl.SessionRings;
import java.io.IOException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
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
 * <p>An idle agent spins briefly (in latency mode for {@code pagewire.node.busyPollNs}), then marks
 * itself asleep in every ring's header and sleeps in a selector on the sessions' {@link RingBell}s: an
 * application that posts to a sleeping agent writes a byte on its bell, and the agent wakes from
 * that write alone. An application that could not reach its bell rings on its session stream
 * instead, which wakes the same selector ({@link #wake}). Only a node that could open no selector
 * parks, and naps first, as {@link RingIdler} says.
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
    /** Where the agent sleeps, woken by bells and by {@link #wake}; null if none could be opened (it parks). */
    private final Selector selector = openSelector();
    /** Bells listening for their application, by ring file. */
    private final Map<java.nio.file.Path, ServerSocketChannel> listening = new ConcurrentHashMap<>();
    /** Sessions whose bell the agent is to watch (registered on the agent's thread, before it sleeps). */
    private final Queue<Session> toWatch = new ConcurrentLinkedQueue<>();
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
        SessionRings rings = SessionRings.create(directory.resolve(name), ringBytes, random.nextLong());
        if (selector != null) {
            ServerSocketChannel bell = RingBell.listen(rings.path());
            if (bell != null) {
                listening.put(rings.path(), bell);
            }
        }
        return rings;
    }

    private static Selector openSelector() {
        try {
            return Selector.open();
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "no selector for ring bells; applications wake the ring agent over their streams", e);
            return null;
        }
    }

    /** Starts reading a session's request ring (and the agent, at the first session). */
    synchronized void activate(Session session) {
        active.add(session);
        if (selector != null && listening.containsKey(session.rings().path())) {
            toWatch.add(session);
            selector.wakeup();
        }
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
        if (selector != null) {
            selector.wakeup();
        }
    }

    /** Stops reading a session's ring, closes its bell and deletes their files (the mapping goes when nothing refers to it). */
    void release(Session session, SessionRings rings) {
        active.remove(session);
        RingBell bell = session.bell();
        if (bell != null) {
            bell.close();
        }
        discard(rings);
    }

    /** Deletes rings that were offered and never attached, or whose session ended, with their bell. */
    void discard(SessionRings rings) {
        discardListener(rings.path());
        rings.deleteFile();
    }

    @Override
    public synchronized void close() {
        running = false;
        Thread t = agent;
        if (t != null) {
            wake();
            try {
                t.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            agent = null;
        }
        if (selector != null) {
            try {
                selector.close();
            } catch (IOException e) {
                // The agent has stopped; nothing waits on the selector any more.
            }
        }
        for (java.nio.file.Path rings : List.copyOf(listening.keySet())) {
            discardListener(rings);
        }
    }

    /** The duty cycle: read every ring; when they stay empty, idle as {@link RingIdler} says. */
    private void run() {
        RingIdler idler = selector == null ? new RingIdler(spinNs, NAP_NS) : RingIdler.withBells(spinNs);
        RingIdler.Agent self = new RingIdler.Agent() {
            @Override
            public void sleep(long maxNs) {
                RingIdler.sleepOn(selector, maxNs, RingPort.this::watchNewBells, RingPort.this::answerBells);
            }

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

    /** Watches the bells of sessions activated since the agent last slept (a selector registers on its own thread). */
    private void watchNewBells() {
        Session session;
        while ((session = toWatch.poll()) != null) {
            SessionRings rings = session.rings();
            ServerSocketChannel server = rings == null ? null : listening.get(rings.path());
            if (server == null) {
                continue;
            }
            try {
                server.register(selector, SelectionKey.OP_ACCEPT, session);
            } catch (IOException e) {
                discardListener(rings.path());
            }
        }
    }

    /** Accepts applications that connected to their bell, and reads the wakes that woke the agent. */
    private void answerBells() {
        for (SelectionKey key : selector.selectedKeys()) {
            if (!key.isValid()) {
                continue;
            }
            if (key.isAcceptable()) {
                Session session = (Session) key.attachment();
                SessionRings rings = session.rings();
                try {
                    SocketChannel channel = ((ServerSocketChannel) key.channel()).accept();
                    if (channel != null) {
                        RingBell bell = RingBell.accepted(channel);
                        channel.register(selector, SelectionKey.OP_READ, bell);
                        session.bell(bell);
                        if (rings != null) {
                            discardListener(rings.path()); // one application per session: nobody else may connect
                        }
                    }
                } catch (IOException e) {
                    LOG.log(System.Logger.Level.DEBUG, "the bell of " + session.endpoint + " could not be accepted; its stream rings instead", e);
                }
            } else if (key.isReadable() && !((RingBell) key.attachment()).drain()) {
                key.cancel(); // the application closed its bell
            }
        }
        selector.selectedKeys().clear();
    }

    private void discardListener(java.nio.file.Path rings) {
        ServerSocketChannel server = listening.remove(rings);
        if (server != null) {
            try {
                server.close();
            } catch (IOException e) {
                // Closing a listener that failed already.
            }
        }
        RingBell.deleteFile(rings);
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
