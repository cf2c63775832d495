package io.pagewire.node.verbs;

import io.grpc.netty.shaded.io.netty.bootstrap.ServerBootstrap;
import io.grpc.netty.shaded.io.netty.buffer.ByteBuf;
import io.grpc.netty.shaded.io.netty.buffer.Unpooled;
import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandlerContext;
import io.grpc.netty.shaded.io.netty.channel.ChannelInboundHandlerAdapter;
import io.grpc.netty.shaded.io.netty.channel.ChannelInitializer;
import io.grpc.netty.shaded.io.netty.channel.EventLoop;
import io.grpc.netty.shaded.io.netty.util.ReferenceCountUtil;
import io.grpc.netty.shaded.io.netty.util.concurrent.ScheduledFuture;
import io.pagewire.node.loop.LoopDutyCycle;
import io.pagewire.node.loop.NodeEventLoops;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.node.trace.HopTrace;
import io.pagewire.ring.FaultRecord;
import io.pagewire.ring.PostReceiveRecord;
import io.pagewire.ring.PostRecord;
import io.pagewire.ring.ScatterGatherRecord;
import io.pagewire.ring.RingBell;
import io.pagewire.ring.SessionRings;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;

/**
 * The node's side of the shared-memory rings: it creates each session's ring file and reads each
 * session's request ring on the event loop that also carries the node's lanes, so a post goes from
 * the ring to the fabric on one thread (as Aeron's conductor reads its clients' command buffers).
 *
 * <p>A reader with work, or idle for less than its spin time, gets a turn at the loop's next pass
 * ({@link LoopDutyCycle}); then it marks itself asleep in the ring's header, looks once more, and
 * stops. A poster wakes it with a byte on the session's {@link RingBell} (or, without one, on its
 * session stream: {@link #wake}); a sleeping reader also looks every {@code pagewire.rings.sleepLimitNs},
 * so a lost doorbell costs no more than that.
 */
final class RingPort implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(RingPort.class.getName());
    /** Posts taken from one session's ring per turn before the loop does other work. */
    private static final int POSTS_PER_TURN = 64;
    /** How long a control call waits for posts claimed before it and not yet committed (a poster that died mid-record). */
    private static final long POSTS_BEFORE_LIMIT_NS = 1_000_000_000L;
    /** Unix-domain socket paths are limited to 108 bytes on Linux (sun_path), terminator included. */
    private static final int MAX_BELL_PATH_BYTES = 107;
    /** What the node writes on a bell to wake its application (a duplicate per ring; never released). */
    private static final ByteBuf WAKE = Unpooled.unreleasableBuffer(Unpooled.directBuffer(1).writeByte(1));

    private final String nodeId;
    private final Path directory;
    private final int ringBytes;
    private final BiConsumer<Session, Post> poster;
    private final BiConsumer<Session, Fault> faulter;
    private final NodeEventLoops loops;
    private final SecureRandom random = new SecureRandom();
    /** The reader of every session whose rings were made and not yet released, by ring file. */
    private final Map<Path, SessionReader> readers = new ConcurrentHashMap<>();
    /** How long a reader keeps looking at an empty ring before it sleeps. */
    private final long spinNs;
    /** Looks at every sleeping reader's ring now and then: a lost doorbell costs no more than this period. */
    private final ScheduledFuture<?> safetyNet;

    /** One decoded POST record (work requests), or POST_RECEIVE record (receives, for a queue pair or a shared receive queue). */
    record Post(int qpn, List<WorkRequest> requests, int srqId, List<ReceiveRequest> receives) {
    }

    /** One FAULT record: a CPU of the session needs [address, address + length) resident. */
    record Fault(long token, long address, int length, boolean write) {
    }

    /**
     * @param directory where ring files are made (the node's owner directory); null turns user-level access off
     * @param sleepLimitNs how often every sleeping reader looks at its ring anyway
     * @param loops the node's event loops, where the rings are read and the bells served
     * @param poster posts a decoded record on the session's queue pair (the verbs service's post path)
     * @param faulter serves a CPU fault of the session (off the loop: a fault may wait for swap)
     */
    RingPort(String nodeId, Path directory, int ringBytes, long spinNs, long sleepLimitNs, NodeEventLoops loops,
            BiConsumer<Session, Post> poster, BiConsumer<Session, Fault> faulter) {
        this.nodeId = nodeId;
        this.directory = directory;
        this.ringBytes = ringBytes;
        this.spinNs = spinNs;
        this.loops = loops;
        this.poster = poster;
        this.faulter = faulter;
        this.safetyNet = directory == null ? null
                : loops.workers().next().scheduleAtFixedRate(this::lookAtSleepers, sleepLimitNs, sleepLimitNs, TimeUnit.NANOSECONDS);
    }

    /** Creates a session's ring file and its bell; throws with the reason when the node offers no rings. */
    SessionRings create(Endpoint endpoint) {
        if (directory == null) {
            throw new IllegalStateException("node " + nodeId + " offers no shared-memory rings (pagewire.node.ringDirectory is empty or"
                    + " not a writable directory)");
        }
        if (!Files.isDirectory(directory) || !Files.isWritable(directory)) {
            throw new IllegalStateException("node " + nodeId + " cannot make rings in " + directory + ": not a writable directory");
        }
        String name = "pagewire-" + nodeId.replaceAll("[^A-Za-z0-9_.-]", "_") + "-" + endpoint.id() + "-"
                + Long.toHexString(random.nextLong()) + ".rings";
        SessionRings rings = SessionRings.create(directory.resolve(name), ringBytes, random.nextLong());
        SessionReader reader = new SessionReader(rings, loops.workers().next());
        readers.put(rings.path(), reader);
        reader.listen();
        return rings;
    }

    /** Where the CPU-visible page table of a session's endpoint goes: beside its rings, named after them. */
    static Path pageTableFor(SessionRings rings) {
        return rings.path().resolveSibling(rings.path().getFileName() + ".pages");
    }

    /** Starts reading a session's request ring. */
    void activate(Session session) {
        SessionReader reader = readers.get(session.rings().path());
        if (reader != null) {
            reader.session = session;
            reader.execute(reader::attachBell);
            reader.kickFromAnywhere();
        }
    }

    /** A doorbell from an application on its session stream: its reader looks at the ring now. */
    void wake(Session session) {
        SessionRings rings = session.rings();
        SessionReader reader = rings == null ? null : readers.get(rings.path());
        if (reader != null) {
            reader.kickFromAnywhere();
        }
    }

    /**
     * Runs {@code then} once the session's request ring has been read as far as it was written at
     * this call (or after {@link #POSTS_BEFORE_LIMIT_NS}, if a poster never commits what it claimed),
     * so that the posts an application made before a control call (a destroy) reach their queue pair
     * first, as an HCA takes the WQEs posted before it destroys the pair. Without a reader, at once.
     */
    void afterPostsMadeBefore(Session session, Runnable then) {
        SessionRings rings = session.rings();
        SessionReader reader = rings == null ? null : readers.get(rings.path());
        if (reader == null || reader.released) {
            then.run();
            return;
        }
        long written = rings.requests().producerPosition();
        long deadline = System.nanoTime() + POSTS_BEFORE_LIMIT_NS;
        try {
            reader.loop.execute(() -> reader.readUpTo(written, deadline, then));
        } catch (RejectedExecutionException e) {
            then.run(); // the node is shutting its loops down: nothing is read any more
        }
    }

    /**
     * Stops reading rings that were offered and never attached, or whose session ended; closes their
     * bell and deletes both files (the mapping goes when nothing refers to it).
     */
    void discard(SessionRings rings) {
        SessionReader reader = readers.remove(rings.path());
        if (reader != null) {
            reader.release();
        }
        RingBell.deleteFile(rings.path());
        rings.deleteFile();
    }

    @Override
    public void close() {
        if (safetyNet != null) {
            safetyNet.cancel(false);
        }
        for (SessionReader reader : List.copyOf(readers.values())) {
            discard(reader.rings);
        }
    }

    private void lookAtSleepers() {
        for (SessionReader reader : readers.values()) {
            reader.kickFromAnywhere();
        }
    }

    /**
     * One session's ring reader and bell, confined to one event loop: every field but the volatile
     * ones is touched on that loop only.
     */
    private final class SessionReader implements LoopDutyCycle.Poller {
        final SessionRings rings;
        final EventLoop loop;
        volatile Session session;
        volatile boolean released;
        /** The bell's listening socket until the application connects; then null (set by the creating thread, closed on the loop). */
        private volatile Channel listener;
        /** The application's end of the bell once it connected. */
        private volatile Channel bell;
        /** Whether a turn is due on the loop (or running). */
        private boolean scheduled;
        private long idleSinceNs = -1;
        private final Runnable kick = this::kick;
        /** The duty cycle of {@link #loop}, found on the loop's thread at the first turn. */
        private LoopDutyCycle cycle;

        SessionReader(SessionRings rings, EventLoop loop) {
            this.rings = rings;
            this.loop = loop;
        }

        /** Opens the bell's socket beside the ring file; without one (path too long, no socket) the stream rings. */
        void listen() {
            Path path = RingBell.pathFor(rings.path());
            if (path.toString().getBytes(StandardCharsets.UTF_8).length > MAX_BELL_PATH_BYTES) {
                return;
            }
            try {
                listener = new ServerBootstrap().group(loop).channel(loops.domainServerChannelType())
                        .childHandler(new ChannelInitializer<>() {
                            @Override
                            protected void initChannel(Channel ch) {
                                ch.pipeline().addLast(new BellHandler());
                            }
                        })
                        .bind(loops.domainAddress(path)).syncUninterruptibly().channel();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.DEBUG, "no bell at " + path + "; the application rings on its stream", e);
                listener = null;
            }
        }

        /** Hands the node's end of the bell to the session, once both exist (on the loop). */
        void attachBell() {
            Session s = session;
            Channel ch = bell;
            if (s != null && ch != null && !released) {
                s.bell(this::ring);
            }
        }

        /** Wakes the application: one byte on the bell; false when there is no bell to ring. */
        private boolean ring() {
            Channel ch = bell;
            if (ch == null || !ch.isActive()) {
                return false;
            }
            // Bytes the application has not read yet wake it as well: an application that sets its
            // "asleep" flag and never reads its bell must not make the node queue bytes without end.
            if (ch.isWritable()) {
                HopTrace.mark(HopTrace.Hop.BELL_RUNG);
                ch.writeAndFlush(WAKE.duplicate(), ch.voidPromise());
            }
            return true;
        }

        void kickFromAnywhere() {
            if (loop.inEventLoop()) {
                kick();
            } else {
                execute(kick);
            }
        }

        void execute(Runnable task) {
            try {
                loop.execute(task);
            } catch (RejectedExecutionException e) {
                // The node is shutting down its loops; nothing is read any more.
            }
        }

        /** On the loop: take a turn now unless one is queued already. */
        private void kick() {
            if (scheduled || released || session == null) {
                return;
            }
            scheduled = true;
            rings.nodeAsleep(false);
            poll();
        }

        /**
         * One turn: read the ring; ask the loop for the next turn while there is work or the spin
         * lasts, else sleep. The loop reads its sockets between turns (see {@link LoopDutyCycle}).
         */
        @Override
        public void poll() {
            if (released) {
                scheduled = false;
                return;
            }
            if (readOnce() > 0) {
                idleSinceNs = -1;
                again();
                return;
            }
            long now = System.nanoTime();
            if (idleSinceNs < 0) {
                idleSinceNs = now;
            }
            if (now - idleSinceNs < spinNs) {
                Thread.yield(); // another poller may need this core more (2 cores, more pollers)
                again();
                return;
            }
            rings.nodeAsleep(true);
            if (readOnce() > 0) {
                rings.nodeAsleep(false);
                idleSinceNs = -1;
                again();
                return;
            }
            idleSinceNs = -1;
            scheduled = false;
        }

        /** Another turn at the loop's next pass (after it has read its sockets). */
        private void again() {
            if (cycle == null) {
                cycle = LoopDutyCycle.onThisLoop();
            }
            if (cycle != null) {
                cycle.again(this);
            } else {
                execute(this::poll); // a loop without a duty cycle: tasks, as before
            }
        }

        private int readOnce() {
            Session s = session;
            try {
                return rings.requests().read((type, buffer, offset, length) -> {
                    HopTrace.mark(type == PostReceiveRecord.TYPE || type == ScatterGatherRecord.RECEIVE_TYPE ? HopTrace.Hop.RECEIVE_READ
                            : type == PostRecord.TYPE || type == ScatterGatherRecord.POST_TYPE ? HopTrace.Hop.POST_READ : null);
                    if (type == PostReceiveRecord.TYPE) {
                        List<ReceiveRequest> receives = RingCodec.decodeReceives(buffer, offset, length);
                        if (receives == null) {
                            LOG.log(System.Logger.Level.WARNING, "a malformed receive record of " + length + " bytes on " + s.endpoint + " was dropped");
                            return;
                        }
                        poster.accept(s, new Post(PostReceiveRecord.qpn(buffer, offset), null, PostReceiveRecord.srqId(buffer, offset), receives));
                        return;
                    }
                    if (type == ScatterGatherRecord.RECEIVE_TYPE) {
                        ReceiveRequest receive = RingCodec.decodeReceiveList(buffer, offset, length);
                        if (receive == null) {
                            LOG.log(System.Logger.Level.WARNING, "a malformed receive list record of " + length + " bytes on " + s.endpoint
                                    + " was dropped");
                            return;
                        }
                        poster.accept(s, new Post(ScatterGatherRecord.qpn(buffer, offset), null, ScatterGatherRecord.srqId(buffer, offset),
                                List.of(receive)));
                        return;
                    }
                    if (type == ScatterGatherRecord.POST_TYPE) {
                        WorkRequest request = RingCodec.decodePostList(buffer, offset, length);
                        if (request == null) {
                            LOG.log(System.Logger.Level.WARNING, "a malformed post list record of " + length + " bytes on " + s.endpoint
                                    + " was dropped");
                            return;
                        }
                        poster.accept(s, new Post(ScatterGatherRecord.qpn(buffer, offset), List.of(request), 0, null));
                        return;
                    }
                    if (type == FaultRecord.TYPE) {
                        if (length < FaultRecord.LENGTH) {
                            LOG.log(System.Logger.Level.WARNING, "a malformed fault record of " + length + " bytes on " + s.endpoint + " was dropped");
                            return;
                        }
                        faulter.accept(s, new Fault(FaultRecord.token(buffer, offset), FaultRecord.address(buffer, offset),
                                FaultRecord.length(buffer, offset), FaultRecord.write(buffer, offset)));
                        return;
                    }
                    if (type != PostRecord.TYPE) {
                        return;
                    }
                    List<WorkRequest> requestsRead = RingCodec.decodePost(buffer, offset, length);
                    if (requestsRead == null) {
                        LOG.log(System.Logger.Level.WARNING, "a malformed post record of " + length + " bytes on " + s.endpoint + " was dropped");
                        return;
                    }
                    poster.accept(s, new Post(PostRecord.qpn(buffer, offset), requestsRead, 0, null));
                }, POSTS_PER_TURN);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "reading the rings of " + s.endpoint + " on node " + nodeId + " failed a turn", e);
                return 0;
            }
        }

        /** On the loop: reads until the ring's reader passed {@code position}, looking again shortly while it has not, then runs {@code then}. */
        void readUpTo(long position, long deadlineNs, Runnable then) {
            while (!released && session != null && rings.requests().consumerPosition() < position && readOnce() > 0) {
                // read on: each turn takes at most POSTS_PER_TURN records
            }
            if (released || session == null || rings.requests().consumerPosition() >= position || System.nanoTime() > deadlineNs) {
                then.run();
                return;
            }
            try {
                loop.schedule(() -> readUpTo(position, deadlineNs, then), 50, TimeUnit.MICROSECONDS);
            } catch (RejectedExecutionException e) {
                then.run();
            }
        }

        /** Stops reading and closes the bell's sockets (on the loop). */
        void release() {
            released = true;
            Session s = session;
            if (s != null) {
                s.bell(null);
            }
            execute(() -> {
                closeListener();
                Channel ch = bell;
                if (ch != null) {
                    ch.close();
                }
            });
        }

        private void closeListener() {
            Channel l = listener;
            if (l != null) {
                l.close();
                listener = null;
            }
            RingBell.deleteFile(rings.path());
        }

        /** The node's end of one application's bell: a byte read is a doorbell. */
        private final class BellHandler extends ChannelInboundHandlerAdapter {
            @Override
            public void channelActive(ChannelHandlerContext ctx) {
                if (bell != null || released) {
                    ctx.close(); // one application per session: nobody else may connect
                    return;
                }
                bell = ctx.channel();
                closeListener();
                attachBell();
                ctx.fireChannelActive();
            }

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ReferenceCountUtil.release(msg);
                kick();
            }

            @Override
            public void channelInactive(ChannelHandlerContext ctx) {
                Session s = session;
                if (ctx.channel() == bell && s != null) {
                    s.bell(null); // the application closed its bell: wakes go on the stream
                }
                ctx.fireChannelInactive();
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                ctx.close();
            }
        }
    }
}
