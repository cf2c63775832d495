package io.pagewire.node.cm;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.pagewire.proto.fabric.CmMessage;
import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The node's connection manager: librdmacm's service (rdma_cm) for the programs on this node. Its
 * ids live in event channels; it resolves IP addresses to nodes (each node answers to one address, as
 * a RoCE port does), keeps the listens of its port spaces, and runs the InfiniBand CM's exchanges with
 * the other nodes' managers over the fabric (REQ, REP, RTU, REJ, DREQ, DREP, SIDR), sending each
 * request again until it is answered or its retries run out. The queue pairs themselves are the
 * programs': an event carries what a program needs to move its pair to RTR and RTS (the peer's node,
 * LID, queue pair and first PSN), as the kernel's rdma_init_qp_attr gives librdmacm.
 *
 * <p>Every entry point takes the manager's lock; events are handed to their channel's sink under it,
 * so a channel sees its events in the order they happened.
 */
public final class ConnectionManager implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(ConnectionManager.class.getName());

    /** librdmacm's port spaces. */
    public static final int PS_IPOIB = 0x0002;
    public static final int PS_TCP = 0x0106;
    public static final int PS_UDP = 0x0111;
    public static final int PS_IB = 0x013F;

    /** ibverbs' queue pair types. */
    public static final int QPT_RC = 2;
    public static final int QPT_UC = 3;
    public static final int QPT_UD = 4;

    /** The InfiniBand CM's reject reasons rdma_cm reports as REJECTED's status. */
    public static final int REJECT_INVALID_SERVICE_ID = 8;
    public static final int REJECT_CONSUMER_DEFINED = 28;

    /** Where ephemeral ports (a bind to port 0, a connect without a bind) are taken from, as Linux's default range. */
    private static final int FIRST_EPHEMERAL_PORT = 32768;
    private static final int LAST_EPHEMERAL_PORT = 60999;

    /** How the manager reaches its peers' managers, and which peers there are. */
    public interface Wire {
        void send(String node, CmMessage message);

        /** The nodes an address query goes to (the linked peers). */
        Collection<String> peers();
    }

    /** Where a channel's events go (its stream to the program). */
    public interface Sink {
        void event(CmEvents.Event event);

        /** The channel cannot go on (its stream failed): end it. */
        void close();
    }

    private final String nodeId;
    private final int lid;
    private final byte[] address;
    private final Wire wire;
    private final ScheduledExecutorService timers;
    private final CmTimings timings;
    private final Supplier<Long> keys;

    private final Map<Long, Channel> channels = new HashMap<>();
    private final Map<Integer, CmId> ids = new HashMap<>();
    /** Bound ports, by port space and port: the id holding each. */
    private final Map<Long, CmId> bound = new HashMap<>();
    /** What address queries learnt: which node owns an address. */
    private final Map<String, String> neighbours = new HashMap<>();
    /** Ids waiting for an address query's answer, by the address they asked about. */
    private final Map<String, List<CmId>> resolving = new HashMap<>();
    /** Passive ids made by a peer's REQ, by the peer and its id: a REQ sent again finds its first. */
    private final Map<String, CmId> byRemote = new HashMap<>();
    private long nextChannel = 1;
    private int nextId = 1;
    private int nextEphemeral = FIRST_EPHEMERAL_PORT;
    private boolean closed;

    private final CmCounters counters = new CmCounters();

    /**
     * @param lid the node's LID, which events carry so that programs address the peer's queue pair
     * @param address the IP address this node answers to (4 or 16 bytes)
     * @param keys where channel keys come from (random)
     */
    public ConnectionManager(String nodeId, int lid, InetAddress address, Wire wire, ScheduledExecutorService timers, CmTimings timings,
            Supplier<Long> keys) {
        this.nodeId = nodeId;
        this.lid = lid;
        this.address = address.getAddress();
        this.wire = wire;
        this.timers = timers;
        this.timings = timings;
        this.keys = keys;
    }

    /** The address this node answers to. */
    public byte[] address() {
        return address.clone();
    }

    public CmCounters counters() {
        return counters;
    }

    /** What a call tells its caller about the id it operated on: its number and addresses, copied under the lock. */
    public record IdView(int id, byte[] src, int srcPort, byte[] dst, int dstPort) {
    }

    private static IdView view(CmId id) {
        return new IdView(id.id, id.src.clone(), id.srcPort, id.dst.clone(), id.dstPort);
    }

    // ---- channels ----

    /** A program's event channel: its ids and where their events go. */
    public final class Channel {
        final long id;
        final long key;
        final String caller;
        final Sink sink;
        final Map<Integer, CmId> ids = new HashMap<>();

        Channel(long id, long key, String caller, Sink sink) {
            this.id = id;
            this.key = key;
            this.caller = caller;
            this.sink = sink;
        }

        public long id() {
            return id;
        }

        public long key() {
            return key;
        }
    }

    /** Opens a channel for {@code caller}, whose events go to {@code sink}. */
    public synchronized Channel openChannel(String caller, Sink sink) {
        if (closed) {
            throw new CmException(CmException.Code.UNAVAILABLE, "the node is shutting down");
        }
        Channel channel = new Channel(nextChannel++, keys.get(), caller, sink);
        channels.put(channel.id, channel);
        counters.channelsOpened++;
        return channel;
    }

    /** The channel's stream ended: its ids are destroyed, as a process's are when its rdma_cm file closes. */
    public synchronized void closeChannel(long channelId) {
        Channel channel = channels.remove(channelId);
        if (channel == null) {
            return;
        }
        for (CmId id : List.copyOf(channel.ids.values())) {
            destroy(id);
        }
    }

    /** The channel named, proven by its key; the caller must be the one that opened it. */
    private Channel channel(long channelId, long key, String caller) {
        Channel channel = channels.get(channelId);
        if (channel == null || channel.key != key || !channel.caller.equals(caller)) {
            throw new CmException(CmException.Code.NOT_FOUND, "no event channel " + channelId + " of this caller (it was closed, or the key is wrong)");
        }
        return channel;
    }

    private CmId id(Channel channel, int id) {
        CmId found = channel.ids.get(id);
        if (found == null) {
            throw new CmException(CmException.Code.NOT_FOUND, "no rdma_cm id " + id + " on event channel " + channel.id);
        }
        return found;
    }

    // ---- operations (rdma_cm's calls) ----

    /** rdma_create_id. */
    public synchronized IdView create(long channelId, long key, String caller, int portSpace, int qpType) {
        Channel channel = channel(channelId, key, caller);
        checkPortSpace(portSpace, qpType);
        CmId id = new CmId(nextId++, channel, portSpace, qpType);
        channel.ids.put(id.id, id);
        ids.put(id.id, id);
        return view(id);
    }

    private static void checkPortSpace(int portSpace, int qpType) {
        if (portSpace != PS_TCP && portSpace != PS_UDP && portSpace != PS_IB && portSpace != PS_IPOIB) {
            throw new CmException(CmException.Code.INVALID, "port space 0x" + Integer.toHexString(portSpace)
                    + " is not one of librdmacm's (RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB)");
        }
        if (qpType != QPT_RC && qpType != QPT_UC && qpType != QPT_UD) {
            throw new CmException(CmException.Code.INVALID, "queue pair type " + qpType + " is not RC (2), UC (3) or UD (4)");
        }
    }

    /** rdma_bind_addr: the node's address (or any) and a port (0: an ephemeral one). */
    public synchronized IdView bind(long channelId, long key, String caller, int idNumber, byte[] ip, int port) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.IDLE) {
            throw new CmException(CmException.Code.INVALID, "rdma_bind_addr: id " + id.id + " is " + id.state + ", not IDLE");
        }
        if (ip.length != 0 && !isAny(ip) && !Arrays.equals(ip, address) && !isLocalHost(ip)) {
            throw notThisNode("rdma_bind_addr: ", ip);
        }
        take(id, port);
        id.src = address.clone();
        id.state = CmId.State.BOUND;
        return view(id);
    }

    /** Takes a port of the id's port space for it: the one asked for, or the next free ephemeral one when 0. */
    private void take(CmId id, int port) {
        if (port < 0 || port > 0xFFFF) {
            throw new CmException(CmException.Code.INVALID, "port " + port + " is out of range");
        }
        if (port == 0) {
            for (int tries = 0; tries <= LAST_EPHEMERAL_PORT - FIRST_EPHEMERAL_PORT; tries++) {
                int candidate = nextEphemeral;
                nextEphemeral = candidate == LAST_EPHEMERAL_PORT ? FIRST_EPHEMERAL_PORT : candidate + 1;
                if (!bound.containsKey(portKey(id.portSpace, candidate))) {
                    port = candidate;
                    break;
                }
            }
            if (port == 0) {
                throw new CmException(CmException.Code.ADDRESS_IN_USE, "every ephemeral port of the port space is taken");
            }
        } else if (bound.containsKey(portKey(id.portSpace, port))) {
            throw new CmException(CmException.Code.ADDRESS_IN_USE, "port " + port + " of port space 0x" + Integer.toHexString(id.portSpace)
                    + " is taken on node " + nodeId);
        }
        bound.put(portKey(id.portSpace, port), id);
        id.srcPort = port;
        id.ownsPort = true;
    }

    private static long portKey(int portSpace, int port) {
        return ((long) portSpace << 16) | port;
    }

    /**
     * rdma_resolve_addr: finds the node that owns {@code dst} (this one, one a query found before, or
     * the first peer to answer a query), then ADDR_RESOLVED; ADDR_ERROR when no node answers within
     * the timeout.
     */
    public synchronized IdView resolveAddress(long channelId, long key, String caller, int idNumber, byte[] src, byte[] dst, int dstPort,
            int timeoutMs) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.IDLE && id.state != CmId.State.BOUND) {
            throw new CmException(CmException.Code.INVALID, "rdma_resolve_addr: id " + id.id + " is " + id.state);
        }
        if (dst.length != 4 && dst.length != 16) {
            throw new CmException(CmException.Code.INVALID, "rdma_resolve_addr: the destination must be an IPv4 or IPv6 address");
        }
        if (isAny(dst)) {
            throw new CmException(CmException.Code.INVALID, "rdma_resolve_addr: the destination is the any address");
        }
        if (id.srcPort == 0) {
            if (src.length != 0 && !isAny(src) && !Arrays.equals(src, address) && !isLocalHost(src)) {
                throw notThisNode("rdma_resolve_addr: source ", src);
            }
            take(id, 0);
            id.src = address.clone();
            }
        id.dst = dst.clone();
        id.dstPort = dstPort;
        id.state = CmId.State.ADDRESS_QUERY;
        String asked = show(dst);
        if (isMulticast(dst)) {
            // A group is no node's: it resolves here, through this node's port, as a multicast address does.
            id.peerNode = nodeId;
            id.state = CmId.State.ADDRESS_RESOLVED;
            emit(id, CmEvents.ADDR_RESOLVED, 0);
            return view(id);
        }
        String owner = Arrays.equals(dst, address) || isLocalHost(dst) ? nodeId : neighbours.get(asked);
        if (owner != null) {
            id.peerNode = owner;
            id.state = CmId.State.ADDRESS_RESOLVED;
            emit(id, CmEvents.ADDR_RESOLVED, 0);
            return view(id);
        }
        resolving.computeIfAbsent(asked, a -> new ArrayList<>()).add(id);
        id.resolvingAddress = asked;
        CmMessage query = CmMessage.newBuilder().setKind(CmMessage.Kind.ADDRESS_QUERY).setAddress(ByteString.copyFrom(dst)).build();
        for (String peer : wire.peers()) {
            wire.send(peer, query);
        }
        counters.addressQueries++;
        id.timer = schedule(Math.max(1, timeoutMs), () -> addressTimedOut(id, asked));
        return view(id);
    }

    private synchronized void addressTimedOut(CmId id, String asked) {
        List<CmId> waiting = resolving.get(asked);
        if (waiting == null || !waiting.remove(id) || id.state != CmId.State.ADDRESS_QUERY) {
            return;
        }
        if (waiting.isEmpty()) {
            resolving.remove(asked);
        }
        id.resolvingAddress = null;
        id.state = CmId.State.BOUND; // the resolve took a port
        counters.addressErrors++;
        emit(id, CmEvents.ADDR_ERROR, -CmEvents.ETIMEDOUT);
    }

    /**
     * rdma_resolve_route: a path query to the node that owns the address (InfiniBand's path record
     * from the subnet administrator, a round trip over the fabric), whose answer names its LID;
     * ROUTE_RESOLVED then, ROUTE_ERROR when it never comes.
     */
    public synchronized IdView resolveRoute(long channelId, long key, String caller, int idNumber) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.ADDRESS_RESOLVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_resolve_route: id " + id.id + " is " + id.state
                    + "; resolve its address first");
        }
        id.state = CmId.State.ROUTE_QUERY;
        sendUntilAnswered(id, CmMessage.newBuilder().setKind(CmMessage.Kind.ROUTE_QUERY).setLocalId(id.id)
                .setAddress(ByteString.copyFrom(id.dst)).build(), () -> {
                    id.state = CmId.State.ADDRESS_RESOLVED;
                    emit(id, CmEvents.ROUTE_ERROR, -CmEvents.ETIMEDOUT);
                });
        return view(id);
    }

    private void routeAnswered(String from, CmMessage answer) {
        CmId id = ids.get((int) answer.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.state != CmId.State.ROUTE_QUERY) {
            return;
        }
        cancelTimer(id);
        id.peerLid = answer.getLid();
        id.state = CmId.State.ROUTE_RESOLVED;
        emit(id, CmEvents.ROUTE_RESOLVED, 0);
    }

    /**
     * rdma_join_multicast: a UDP or IPoIB id with an address joins the group {@code group}; the
     * library maps the group to {@code lid} (the same on every node) and attaches the id's pair on
     * MULTICAST_JOIN, which follows at once: the groups are the fabric's, no manager admits members.
     */
    public synchronized IdView joinMulticast(long channelId, long key, String caller, int idNumber, byte[] group, int lid) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.portSpace != PS_UDP && id.portSpace != PS_IPOIB) {
            throw new CmException(CmException.Code.INVALID, "rdma_join_multicast: id " + id.id + " is not a UDP or IPoIB id");
        }
        if (id.state == CmId.State.IDLE) {
            throw new CmException(CmException.Code.INVALID, "rdma_join_multicast: id " + id.id + " has no address; bind or resolve it first");
        }
        if ((group.length != 4 && group.length != 16) || !isMulticast(group)) {
            throw new CmException(CmException.Code.INVALID, "rdma_join_multicast: " + show(group) + " is no multicast address");
        }
        if (lid < 0xC000 || lid >= 0xFFFF) {
            throw new CmException(CmException.Code.INVALID, "rdma_join_multicast: LID " + lid + " is no multicast LID");
        }
        counters.events++;
        id.channel.sink.event(new CmEvents.Event(CmEvents.MULTICAST_JOIN, id.id, 0, 0, id.remote, id.src, id.srcPort, group, 0, nodeId, lid,
                id.portSpace, id.qpType));
        return view(id);
    }

    /** rdma_leave_multicast: nothing to undo here (the library detaches the pair); checks the id is the caller's. */
    public synchronized IdView leaveMulticast(long channelId, long key, String caller, int idNumber, byte[] group) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if ((group.length != 4 && group.length != 16) || !isMulticast(group)) {
            throw new CmException(CmException.Code.ADDRESS_NOT_AVAILABLE, "rdma_leave_multicast: " + show(group) + " is no multicast address");
        }
        return view(id);
    }

    /** IPv4 224.0.0.0/4 or IPv6 ff00::/8. */
    private static boolean isMulticast(byte[] ip) {
        return ip.length == 4 ? (ip[0] & 0xF0) == 0xE0 : ip.length == 16 && (ip[0] & 0xFF) == 0xFF;
    }

    /** rdma_listen: the id's port takes connection requests (SIDR requests for UDP ids). */
    public synchronized IdView listen(long channelId, long key, String caller, int idNumber, int backlog) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state == CmId.State.IDLE) {
            take(id, 0);
            id.src = address.clone();
            } else if (id.state != CmId.State.BOUND) {
            throw new CmException(CmException.Code.INVALID, "rdma_listen: id " + id.id + " is " + id.state + "; bind it, unconnected");
        }
        id.state = CmId.State.LISTEN;
        id.backlog = backlog <= 0 ? 1024 : backlog;
        return view(id);
    }

    /** rdma_connect: sends the REQ (SIDR_REQ for UDP ids) to the service at the resolved address. */
    public synchronized IdView connect(long channelId, long key, String caller, int idNumber, CmEvents.Params params) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.ROUTE_RESOLVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_connect: id " + id.id + " is " + id.state + "; resolve its route first");
        }
        id.local = params;
        CmMessage.Builder req = CmMessage.newBuilder().setLocalId(id.id).setPortSpace(id.portSpace).setPort(id.dstPort)
                .setAddress(ByteString.copyFrom(id.dst)).setSrcAddress(ByteString.copyFrom(id.src)).setSrcPort(id.srcPort)
                .setQpn(params.qpn()).setPsn(params.psn()).setLid(lid).setPrivateData(ByteString.copyFrom(params.privateData()))
                .setResponderResources(params.responderResources()).setInitiatorDepth(params.initiatorDepth())
                .setRetryCount(params.retryCount()).setRnrRetryCount(params.rnrRetryCount()).setSrq(params.srq())
                .setFlowControl(params.flowControl());
        if (id.portSpace == PS_UDP || id.qpType == QPT_UD) {
            req.setKind(CmMessage.Kind.SIDR_REQ);
            id.state = CmId.State.SIDR_QUERY;
        } else {
            req.setKind(CmMessage.Kind.REQ);
            id.state = CmId.State.REQ_SENT;
        }
        counters.requestsSent++;
        sendUntilAnswered(id, req.build(), () -> {
            id.state = CmId.State.ROUTE_RESOLVED;
            counters.unreachable++;
            emit(id, CmEvents.UNREACHABLE, -CmEvents.ETIMEDOUT);
        });
        return view(id);
    }

    /**
     * rdma_accept on an id a CONNECT_REQUEST made: sends the REP (SIDR_REP for UDP ids); the RTU that
     * answers it makes the id ESTABLISHED.
     */
    public synchronized IdView accept(long channelId, long key, String caller, int idNumber, CmEvents.Params params) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.REQ_RECEIVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_accept: id " + id.id + " is " + id.state
                    + "; only an id from a CONNECT_REQUEST is accepted, once");
        }
        id.local = params;
        detachFromListener(id);
        if (id.sidr) {
            wire.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.SIDR_REP).setLocalId(id.id).setRemoteId(id.remoteId)
                    .setQpn(params.qpn()).setQkey(params.qkey()).setLid(lid).setPrivateData(ByteString.copyFrom(params.privateData())).build());
            id.state = CmId.State.ESTABLISHED;
            return view(id);
        }
        CmMessage rep = CmMessage.newBuilder().setKind(CmMessage.Kind.REP).setLocalId(id.id).setRemoteId(id.remoteId).setQpn(params.qpn())
                .setPsn(params.psn()).setLid(lid).setPrivateData(ByteString.copyFrom(params.privateData()))
                .setResponderResources(params.responderResources()).setInitiatorDepth(params.initiatorDepth())
                .setRetryCount(params.retryCount()).setRnrRetryCount(params.rnrRetryCount()).setSrq(params.srq())
                .setFlowControl(params.flowControl()).build();
        id.state = CmId.State.REP_SENT;
        sendUntilAnswered(id, rep, () -> {
            id.state = CmId.State.ERROR;
            counters.connectErrors++;
            emit(id, CmEvents.CONNECT_ERROR, -CmEvents.ETIMEDOUT);
        });
        return view(id);
    }

    /** rdma_reject on an id a CONNECT_REQUEST made: the peer sees REJECTED (reason 28, the consumer's) with the private data. */
    public synchronized IdView reject(long channelId, long key, String caller, int idNumber, byte[] privateData) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.REQ_RECEIVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_reject: id " + id.id + " is " + id.state
                    + "; only an id from a CONNECT_REQUEST is rejected, once");
        }
        detachFromListener(id);
        sendReject(id, REJECT_CONSUMER_DEFINED, privateData);
        id.state = CmId.State.REJECTED;
        counters.rejectsSent++;
        return view(id);
    }

    private void sendReject(CmId id, int reason, byte[] privateData) {
        if (id.sidr) {
            wire.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.SIDR_REP).setRemoteId(id.remoteId).setReason(1)
                    .setPrivateData(ByteString.copyFrom(privateData)).build());
        } else {
            wire.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setLocalId(id.id).setRemoteId(id.remoteId)
                    .setReason(reason).setPrivateData(ByteString.copyFrom(privateData)).build());
        }
    }

    /** rdma_establish: the active side's program connected its queue pair itself; the RTU tells the passive side. */
    public synchronized IdView establish(long channelId, long key, String caller, int idNumber) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        if (id.state != CmId.State.REP_RECEIVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_establish: id " + id.id + " is " + id.state
                    + "; it follows a CONNECT_RESPONSE");
        }
        wire.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.RTU).setLocalId(id.id).setRemoteId(id.remoteId).build());
        id.state = CmId.State.ESTABLISHED;
        counters.established++;
        return view(id);
    }

    /**
     * rdma_disconnect: sends the DREQ; the peer sees DISCONNECTED, and so does this id when the DREP
     * comes (or its retries run out). An id already disconnected by its peer answers at once.
     */
    public synchronized IdView disconnect(long channelId, long key, String caller, int idNumber) {
        CmId id = id(channel(channelId, key, caller), idNumber);
        switch (id.state) {
            case ESTABLISHED, REP_SENT, REP_RECEIVED -> startDisconnect(id);
            case DISCONNECTED, DREQ_SENT, TIMEWAIT -> {
                // Already on its way down (the peer's DREQ came first): nothing more to send.
            }
            default -> throw new CmException(CmException.Code.INVALID, "rdma_disconnect: id " + id.id + " is " + id.state + ", not connected");
        }
        return view(id);
    }

    private void startDisconnect(CmId id) {
        cancelTimer(id);
        id.state = CmId.State.DREQ_SENT;
        counters.disconnectsSent++;
        sendUntilAnswered(id, CmMessage.newBuilder().setKind(CmMessage.Kind.DREQ).setLocalId(id.id).setRemoteId(id.remoteId).build(),
                () -> disconnected(id));
    }

    /** The id's connection is down: DISCONNECTED, then TIMEWAIT_EXIT once the time-wait has passed. */
    private void disconnected(CmId id) {
        cancelTimer(id);
        id.state = CmId.State.TIMEWAIT;
        emit(id, CmEvents.DISCONNECTED, 0);
        id.timer = schedule(timings.timeWaitMs(), () -> {
            synchronized (this) {
                if (id.state == CmId.State.TIMEWAIT) {
                    id.state = CmId.State.DISCONNECTED;
                    emit(id, CmEvents.TIMEWAIT_EXIT, 0);
                }
            }
        });
    }

    /** rdma_migrate_id: the id's later events go to another channel of the same caller. */
    public synchronized IdView migrate(long channelId, long key, String caller, int idNumber, long toChannel, long toKey) {
        Channel from = channel(channelId, key, caller);
        CmId id = id(from, idNumber);
        Channel to = channel(toChannel, toKey, caller);
        from.ids.remove(id.id);
        to.ids.put(id.id, id);
        id.channel = to;
        return view(id);
    }

    /** rdma_destroy_id: ends what the id was doing (a connection is disconnected, a listen refuses later requests). */
    public synchronized void destroy(long channelId, long key, String caller, int idNumber) {
        destroy(id(channel(channelId, key, caller), idNumber));
    }

    private void destroy(CmId id) {
        cancelTimer(id);
        switch (id.state) {
            case ESTABLISHED, REP_SENT, REP_RECEIVED -> wire.send(id.peerNode,
                    CmMessage.newBuilder().setKind(CmMessage.Kind.DREQ).setLocalId(id.id).setRemoteId(id.remoteId).build());
            case REQ_RECEIVED -> sendReject(id, REJECT_CONSUMER_DEFINED, new byte[0]);
            case REQ_SENT -> wire.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setLocalId(id.id)
                    .setReason(REJECT_CONSUMER_DEFINED).build());
            case LISTEN -> {
                // Requests not yet accepted die with their listen: their peers see REJECTED.
                for (CmId pending : List.copyOf(id.pending)) {
                    destroy(pending);
                    pending.channel.ids.remove(pending.id);
                }
            }
            default -> {
            }
        }
        detachFromListener(id);
        if (id.resolvingAddress != null) {
            List<CmId> waiting = resolving.get(id.resolvingAddress);
            if (waiting != null) {
                waiting.remove(id);
            }
        }
        if (id.srcPort != 0 && id.ownsPort) {
            bound.remove(portKey(id.portSpace, id.srcPort), id);
        }
        if (id.peerNode != null && id.remoteId != 0) {
            byRemote.remove(remoteKey(id.peerNode, id.remoteId), id);
        }
        id.state = CmId.State.DESTROYED;
        id.channel.ids.remove(id.id);
        ids.remove(id.id);
    }

    private void detachFromListener(CmId id) {
        if (id.listener != null) {
            id.listener.pending.remove(id);
            id.listener = null;
        }
    }

    // ---- the wire ----

    /** A message from a peer's manager (or this node's own, for a connection within the node). */
    public void received(String from, byte[] payload) {
        CmMessage message;
        try {
            message = CmMessage.parseFrom(payload);
        } catch (InvalidProtocolBufferException e) {
            synchronized (this) {
                counters.malformed++;
            }
            LOG.log(System.Logger.Level.DEBUG, "a malformed CM message from " + from + ": " + e.getMessage());
            return;
        }
        synchronized (this) {
            if (closed) {
                return;
            }
            switch (message.getKind()) {
                case ADDRESS_QUERY -> {
                    if (Arrays.equals(message.getAddress().toByteArray(), address)) {
                        wire.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.ADDRESS_ANSWER).setAddress(message.getAddress()).build());
                    }
                }
                case ADDRESS_ANSWER -> addressAnswered(from, message.getAddress().toByteArray());
                case ROUTE_QUERY -> {
                    if (Arrays.equals(message.getAddress().toByteArray(), address) || isLocalHost(message.getAddress().toByteArray())) {
                        wire.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.ROUTE_ANSWER).setRemoteId(message.getLocalId()).setLid(lid)
                                .build());
                    }
                }
                case ROUTE_ANSWER -> routeAnswered(from, message);
                case REQ, SIDR_REQ -> requestReceived(from, message);
                case REP -> replyReceived(from, message);
                case RTU -> readyToUse(from, message);
                case REJ -> rejectReceived(from, message);
                case DREQ -> disconnectRequested(from, message);
                case DREP -> {
                    CmId id = ids.get((int) message.getRemoteId());
                    if (id != null && from.equals(id.peerNode) && id.remoteId == message.getLocalId() && id.state == CmId.State.DREQ_SENT) {
                        disconnected(id);
                    }
                }
                case SIDR_REP -> sidrReplyReceived(from, message);
                default -> counters.malformed++;
            }
        }
    }

    /**
     * A peer node's process restarted: its side of every connection with it is gone. Connected ids
     * see DISCONNECTED (their programs' queue pairs fail on their own), an accepted request waiting
     * for its RTU CONNECT_ERROR, a request not yet answered by the program REJECTED; requests this
     * node sent it are answered by the new process (which rejects or ignores them).
     */
    public synchronized void peerRestarted(String peer) {
        for (CmId id : List.copyOf(ids.values())) {
            if (!peer.equals(id.peerNode)) {
                continue;
            }
            switch (id.state) {
                case ESTABLISHED, REP_RECEIVED, DREQ_SENT -> {
                    counters.disconnectsReceived++;
                    disconnected(id);
                }
                case REP_SENT -> {
                    cancelTimer(id);
                    id.state = CmId.State.ERROR;
                    counters.connectErrors++;
                    emit(id, CmEvents.CONNECT_ERROR, -CmEvents.ECONNRESET);
                }
                case REQ_RECEIVED -> {
                    detachFromListener(id);
                    id.state = CmId.State.REJECTED;
                    emit(id, CmEvents.REJECTED, REJECT_CONSUMER_DEFINED);
                }
                default -> {
                }
            }
        }
        neighbours.values().removeIf(peer::equals);
    }

    private void addressAnswered(String from, byte[] ip) {
        String asked = show(ip);
        neighbours.put(asked, from);
        List<CmId> waiting = resolving.remove(asked);
        if (waiting == null) {
            return;
        }
        for (CmId id : waiting) {
            if (id.state == CmId.State.ADDRESS_QUERY) {
                cancelTimer(id);
                id.resolvingAddress = null;
                id.peerNode = from;
                id.state = CmId.State.ADDRESS_RESOLVED;
                emit(id, CmEvents.ADDR_RESOLVED, 0);
            }
        }
    }

    private void requestReceived(String from, CmMessage req) {
        boolean sidr = req.getKind() == CmMessage.Kind.SIDR_REQ;
        CmId earlier = byRemote.get(remoteKey(from, req.getLocalId()));
        if (earlier != null) {
            // Sent again: answer as before (the REP again once accepted), or wait for the program.
            if (earlier.state == CmId.State.REP_SENT && earlier.lastSent != null) {
                wire.send(from, earlier.lastSent);
            }
            return;
        }
        CmId listener = bound.get(portKey(req.getPortSpace(), req.getPort()));
        if (listener == null || listener.state != CmId.State.LISTEN) {
            counters.rejectsSent++;
            if (sidr) {
                wire.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.SIDR_REP).setRemoteId(req.getLocalId()).setReason(1).build());
            } else {
                wire.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setRemoteId(req.getLocalId())
                        .setReason(REJECT_INVALID_SERVICE_ID).build());
            }
            return;
        }
        if (listener.pending.size() >= listener.backlog) {
            counters.rejectsSent++;
            wire.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setRemoteId(req.getLocalId()).setReason(REJECT_CONSUMER_DEFINED)
                    .build());
            return;
        }
        CmId child = new CmId(nextId++, listener.channel, listener.portSpace, listener.qpType);
        child.sidr = sidr;
        child.peerNode = from;
        child.remoteId = req.getLocalId();
        child.src = address.clone();
        child.srcPort = listener.srcPort;
        child.dst = req.getSrcAddress().toByteArray();
        child.dstPort = req.getSrcPort();
        child.state = CmId.State.REQ_RECEIVED;
        child.listener = listener;
        child.remote = paramsOf(req);
        child.peerLid = req.getLid();
        listener.pending.add(child);
        listener.channel.ids.put(child.id, child);
        ids.put(child.id, child);
        byRemote.put(remoteKey(from, req.getLocalId()), child);
        counters.requestsReceived++;
        emit(child, CmEvents.CONNECT_REQUEST, 0, listener.id);
    }

    private void replyReceived(String from, CmMessage rep) {
        CmId id = ids.get((int) rep.getRemoteId());
        if (id == null || !from.equals(id.peerNode)) {
            return;
        }
        if (id.state == CmId.State.ESTABLISHED && id.remoteId == rep.getLocalId()) {
            // Our RTU was lost: the REP came again.
            wire.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.RTU).setLocalId(id.id).setRemoteId(id.remoteId).build());
            return;
        }
        if (id.state != CmId.State.REQ_SENT) {
            return;
        }
        cancelTimer(id);
        id.remoteId = rep.getLocalId();
        id.remote = paramsOf(rep);
        id.peerLid = rep.getLid();
        id.state = CmId.State.REP_RECEIVED;
        emit(id, CmEvents.CONNECT_RESPONSE, 0);
    }

    private void readyToUse(String from, CmMessage rtu) {
        CmId id = ids.get((int) rtu.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.remoteId != rtu.getLocalId() || id.state != CmId.State.REP_SENT) {
            return;
        }
        cancelTimer(id);
        id.state = CmId.State.ESTABLISHED;
        counters.established++;
        emit(id, CmEvents.ESTABLISHED, 0);
    }

    private void rejectReceived(String from, CmMessage rej) {
        CmId id = ids.get((int) rej.getRemoteId());
        if (id != null && from.equals(id.peerNode) && id.state == CmId.State.REQ_SENT) {
            cancelTimer(id);
            id.state = CmId.State.REJECTED;
            counters.rejectsReceived++;
            id.remote = new CmEvents.Params(rej.getPrivateData().toByteArray(), 0, 0, 0, 0, false, false, 0, 0, 0);
            emit(id, CmEvents.REJECTED, rej.getReason());
            return;
        }
        // A requester that gave up (destroyed before the answer): its request's id is rejected, as the kernel's CM reports it.
        CmId pending = byRemote.get(remoteKey(from, rej.getLocalId()));
        if (pending != null && (pending.state == CmId.State.REQ_RECEIVED || pending.state == CmId.State.REP_SENT)) {
            cancelTimer(pending);
            detachFromListener(pending);
            pending.state = CmId.State.REJECTED;
            counters.rejectsReceived++;
            emit(pending, CmEvents.REJECTED, rej.getReason());
        }
    }

    private void disconnectRequested(String from, CmMessage dreq) {
        CmMessage drep = CmMessage.newBuilder().setKind(CmMessage.Kind.DREP).setLocalId(dreq.getRemoteId()).setRemoteId(dreq.getLocalId()).build();
        wire.send(from, drep);
        CmId id = ids.get((int) dreq.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.remoteId != dreq.getLocalId()) {
            return;
        }
        switch (id.state) {
            case ESTABLISHED, REP_SENT, REP_RECEIVED -> {
                counters.disconnectsReceived++;
                disconnected(id);
            }
            case DREQ_SENT -> disconnected(id); // both sides at once
            default -> {
            }
        }
    }

    private void sidrReplyReceived(String from, CmMessage rep) {
        CmId id = ids.get((int) rep.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.state != CmId.State.SIDR_QUERY) {
            return;
        }
        cancelTimer(id);
        if (rep.getReason() != 0) {
            id.state = CmId.State.REJECTED;
            counters.rejectsReceived++;
            id.remote = new CmEvents.Params(rep.getPrivateData().toByteArray(), 0, 0, 0, 0, false, false, 0, 0, 0);
            emit(id, CmEvents.UNREACHABLE, -CmEvents.ECONNREFUSED);
            return;
        }
        id.remote = new CmEvents.Params(rep.getPrivateData().toByteArray(), 0, 0, 0, 0, false, false, rep.getQpn(), 0, rep.getQkey());
        id.peerLid = rep.getLid();
        id.state = CmId.State.ESTABLISHED;
        emit(id, CmEvents.ESTABLISHED, 0);
    }

    private static CmEvents.Params paramsOf(CmMessage m) {
        return new CmEvents.Params(m.getPrivateData().toByteArray(), m.getResponderResources(), m.getInitiatorDepth(), m.getRetryCount(),
                m.getRnrRetryCount(), m.getSrq(), m.getFlowControl(), m.getQpn(), m.getPsn(), m.getQkey());
    }

    private static String remoteKey(String node, long remoteId) {
        return node + "#" + remoteId;
    }

    /**
     * Sends a request and sends it again every response timeout until the answer cancels the id's
     * timer; when the retries run out, {@code gaveUp} runs (under the lock).
     */
    private void sendUntilAnswered(CmId id, CmMessage message, Runnable gaveUp) {
        cancelTimer(id);
        id.lastSent = message;
        id.retriesLeft = timings.retries();
        wire.send(id.peerNode, message);
        id.timer = schedule(timings.responseTimeoutMs(), new Runnable() {
            @Override
            public void run() {
                synchronized (ConnectionManager.this) {
                    if (id.lastSent != message || id.state == CmId.State.DESTROYED) {
                        return;
                    }
                    if (id.retriesLeft-- <= 0) {
                        id.timer = null;
                        gaveUp.run();
                        return;
                    }
                    counters.resent++;
                    wire.send(id.peerNode, message);
                    id.timer = schedule(timings.responseTimeoutMs(), this);
                }
            }
        });
    }

    private ScheduledFuture<?> schedule(long delayMs, Runnable task) {
        return timers.schedule(task, delayMs, TimeUnit.MILLISECONDS);
    }

    private void cancelTimer(CmId id) {
        id.lastSent = null;
        if (id.timer != null) {
            id.timer.cancel(false);
            id.timer = null;
        }
    }

    private void emit(CmId id, int type, int status) {
        emit(id, type, status, 0);
    }

    private void emit(CmId id, int type, int status, int listenId) {
        counters.events++;
        id.channel.sink.event(new CmEvents.Event(type, id.id, listenId, status, id.remote, id.src, id.srcPort, id.dst, id.dstPort,
                id.peerNode, id.peerLid, id.portSpace, id.qpType));
    }

    // ---- addresses ----

    /**
     * A bind to an address that is not this node's, refused as the kernel's rdma_cm refuses it: ENODEV for an
     * address of an interface of this host (one with no RDMA device), EADDRNOTAVAIL for one no interface has.
     * Middleware probes every interface's address this way, so the refusal is routine.
     */
    private CmException notThisNode(String call, byte[] ip) {
        boolean onThisHost;
        try {
            onThisHost = NetworkInterface.getByInetAddress(InetAddress.getByAddress(ip)) != null;
        } catch (IOException e) {
            onThisHost = false;
        }
        return new CmException(onThisHost ? CmException.Code.UNAVAILABLE : CmException.Code.ADDRESS_NOT_AVAILABLE, call + show(ip)
                + " is not this node's address " + show(address) + " (node " + nodeId + "): bind to it, or to the any address");
    }

    private static boolean isAny(byte[] ip) {
        for (byte b : ip) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * 127.0.0.1 or ::1: this host, which for a program means the node it uses. Other loopback
     * addresses are nodes' own (several nodes on one host answer to 127.0.1.1, 127.0.1.2, ...).
     */
    private static boolean isLocalHost(byte[] ip) {
        byte[] v4 = {127, 0, 0, 1};
        byte[] v6 = new byte[16];
        v6[15] = 1;
        return Arrays.equals(ip, v4) || Arrays.equals(ip, v6);
    }

    static String show(byte[] ip) {
        try {
            return InetAddress.getByAddress(ip).getHostAddress();
        } catch (java.net.UnknownHostException e) {
            return "an address of " + ip.length + " bytes";
        }
    }

    /** Ids alive now (for meters and tests). */
    public synchronized int idCount() {
        return ids.size();
    }

    /** Whether an id listens on {@code port} (tests wait for a server program's listen, not just its first id). */
    public synchronized boolean listensOn(int port) {
        return ids.values().stream().anyMatch(id -> id.state == CmId.State.LISTEN && id.srcPort == port);
    }

    public synchronized int channelCount() {
        return channels.size();
    }

    /** The node is going down: every channel's ids are destroyed (peers see DISCONNECTED), every channel told. */
    @Override
    public void close() {
        List<Channel> open;
        synchronized (this) {
            if (closed) {
                return;
            }
            open = List.copyOf(channels.values());
            for (Channel channel : open) {
                closeChannel(channel.id);
            }
            closed = true;
        }
        for (Channel channel : open) {
            channel.sink.close();
        }
    }
}
