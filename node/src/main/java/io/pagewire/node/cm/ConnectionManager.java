package io.pagewire.node.cm;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.pagewire.proto.fabric.CmMessage;
import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The node's connection manager: librdmacm's service (rdma_cm) for the programs on this node. Its
 * ids live in event channels; it resolves IP addresses to nodes (each node answers to one address, as
 * a RoCE port does), keeps the listens of its port spaces, and leaves the exchanges with the other
 * nodes' managers that make and end connections to its InfiniBand CM side ({@link IbCm}). The queue
 * pairs themselves are the programs': an event carries what a program needs to move its pair to RTR
 * and RTS (the peer's node, LID, queue pair and first PSN), as the kernel's rdma_init_qp_attr gives
 * librdmacm.
 *
 * <p>Every entry point takes the manager's lock; the events and messages it decides leave once the
 * lock is released ({@link CmOutbox}), each channel's in the order they happened.
 */
public final class ConnectionManager implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(ConnectionManager.class.getName());

    private final String nodeId;
    private final int lid;
    private final byte[] address;
    private final CmWire wire;
    private final Supplier<Long> keys;
    private final CmCounters counters = new CmCounters();
    private final CmOutbox outbox;
    private final CmRequests requests;
    private final CmIdTable ids;
    private final IbCm connections;

    /** Guarded by the outbox's lock, as everything below. */
    private final Map<Long, CmChannel> channels = new HashMap<>();
    /** What address queries learnt: which node owns an address. */
    private final Map<String, String> neighbours = new HashMap<>();
    /** Ids waiting for an address query's answer, by the address they asked about. */
    private final Map<String, List<CmId>> resolving = new HashMap<>();
    private long nextChannel = 1;
    private boolean closed;

    /**
     * @param lid the node's LID, which events carry so that programs address the peer's queue pair
     * @param address the IP address this node answers to (4 or 16 bytes)
     * @param keys where channel keys come from (random)
     */
    public ConnectionManager(String nodeId, int lid, InetAddress address, CmWire wire, CmTimers timers, CmTimings timings, Supplier<Long> keys) {
        this.nodeId = nodeId;
        this.lid = lid;
        this.address = address.getAddress();
        this.wire = wire;
        this.keys = keys;
        this.outbox = new CmOutbox(wire, counters);
        this.requests = new CmRequests(outbox, timers, timings, counters);
        this.ids = new CmIdTable(nodeId);
        this.connections = new IbCm(lid, this.address, ids, outbox, requests, timings, counters);
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

    /** Opens a channel for {@code caller}, whose events go to {@code sink}. */
    public CmChannel openChannel(String caller, CmChannel.Sink sink) {
        return outbox.locked(() -> {
            if (closed) {
                throw new CmException(CmException.Code.UNAVAILABLE, "the node is shutting down");
            }
            CmChannel channel = new CmChannel(nextChannel++, keys.get(), caller, sink);
            channels.put(channel.id, channel);
            counters.channelsOpened++;
            return channel;
        });
    }

    /** The channel's stream ended: its ids are destroyed, as a process's are when its rdma_cm file closes. */
    public void closeChannel(long channelId) {
        outbox.locked(() -> closeChannelLocked(channelId));
    }

    private void closeChannelLocked(long channelId) {
        CmChannel channel = channels.remove(channelId);
        if (channel != null) {
            for (CmId id : ids.of(channel)) {
                if (id.state != CmId.State.DESTROYED) { // a listen's pending requests went with it
                    destroy(id);
                }
            }
        }
    }

    /** The channel named, proven by its key; the caller must be the one that opened it. */
    private CmChannel channel(long channelId, long key, String caller) {
        CmChannel channel = channels.get(channelId);
        if (channel == null || channel.key != key || !channel.caller.equals(caller)) {
            throw new CmException(CmException.Code.NOT_FOUND, "no event channel " + channelId + " of this caller (it was closed, or the key is wrong)");
        }
        return channel;
    }

    private CmId id(CmChannel channel, int id) {
        CmId found = ids.get(id);
        if (found == null || found.channel != channel) {
            throw new CmException(CmException.Code.NOT_FOUND, "no rdma_cm id " + id + " on event channel " + channel.id);
        }
        return found;
    }

    /** Runs a call on one of the caller's ids under the lock, and answers with the id as the call left it. */
    private IdView onId(long channelId, long key, String caller, int idNumber, Consumer<CmId> call) {
        return outbox.locked(() -> {
            CmId id = id(channel(channelId, key, caller), idNumber);
            call.accept(id);
            return view(id);
        });
    }

    // ---- operations (rdma_cm's calls) ----

    /** rdma_create_id. */
    public IdView create(long channelId, long key, String caller, int portSpace, int qpType) {
        return outbox.locked(() -> {
            CmChannel channel = channel(channelId, key, caller);
            checkPortSpace(portSpace, qpType);
            return view(ids.add(channel, portSpace, qpType));
        });
    }

    private static void checkPortSpace(int portSpace, int qpType) {
        if (portSpace != CmEvents.PS_TCP && portSpace != CmEvents.PS_UDP && portSpace != CmEvents.PS_IB && portSpace != CmEvents.PS_IPOIB) {
            throw new CmException(CmException.Code.INVALID, "port space 0x" + Integer.toHexString(portSpace)
                    + " is not one of librdmacm's (RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB)");
        }
        if (qpType != CmEvents.QPT_RC && qpType != CmEvents.QPT_UC && qpType != CmEvents.QPT_UD) {
            throw new CmException(CmException.Code.INVALID, "queue pair type " + qpType + " is not RC (2), UC (3) or UD (4)");
        }
    }

    /** rdma_bind_addr: the node's address (or any) and a port (0: an ephemeral one). */
    public IdView bind(long channelId, long key, String caller, int idNumber, byte[] ip, int port) {
        return onId(channelId, key, caller, idNumber, id -> {
            if (id.state != CmId.State.IDLE) {
                throw new CmException(CmException.Code.INVALID, "rdma_bind_addr: id " + id.id + " is " + id.state + ", not IDLE");
            }
            if (ip.length != 0 && !isAny(ip) && !Arrays.equals(ip, address) && !isLocalHost(ip)) {
                throw notThisNode("rdma_bind_addr: ", ip);
            }
            ids.take(id, port);
            id.src = address.clone();
            id.state = CmId.State.BOUND;
        });
    }

    /**
     * rdma_resolve_addr: finds the node that owns {@code dst} (this one, one a query found before, or
     * the first peer to answer a query), then ADDR_RESOLVED; ADDR_ERROR when no node answers within
     * the timeout.
     */
    public IdView resolveAddress(long channelId, long key, String caller, int idNumber, byte[] src, byte[] dst, int dstPort, int timeoutMs) {
        return onId(channelId, key, caller, idNumber, id -> resolveAddress(id, src, dst, dstPort, timeoutMs));
    }

    private void resolveAddress(CmId id, byte[] src, byte[] dst, int dstPort, int timeoutMs) {
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
            ids.take(id, 0);
            id.src = address.clone();
        }
        id.dst = dst.clone();
        id.dstPort = dstPort;
        id.state = CmId.State.ADDRESS_QUERY;
        String asked = show(dst);
        // A group is no node's: it resolves here, through this node's port, as a multicast address does.
        String owner = isMulticast(dst) || Arrays.equals(dst, address) || isLocalHost(dst) ? nodeId : neighbours.get(asked);
        if (owner != null) {
            id.peerNode = owner;
            id.state = CmId.State.ADDRESS_RESOLVED;
            emit(id, CmEvents.ADDR_RESOLVED, 0);
            return;
        }
        resolving.computeIfAbsent(asked, a -> new ArrayList<>()).add(id);
        id.resolvingAddress = asked;
        CmMessage query = CmMessage.newBuilder().setKind(CmMessage.Kind.ADDRESS_QUERY).setAddress(ByteString.copyFrom(dst)).build();
        for (String peer : wire.peers()) {
            outbox.send(peer, query);
        }
        counters.addressQueries++;
        requests.after(id, Math.max(1, timeoutMs), () -> addressTimedOut(id, asked));
    }

    private void addressTimedOut(CmId id, String asked) {
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

    private void addressAnswered(String from, byte[] ip) {
        String asked = show(ip);
        neighbours.put(asked, from);
        List<CmId> waiting = resolving.remove(asked);
        if (waiting == null) {
            return;
        }
        for (CmId id : waiting) {
            if (id.state == CmId.State.ADDRESS_QUERY) {
                requests.cancel(id);
                id.resolvingAddress = null;
                id.peerNode = from;
                id.state = CmId.State.ADDRESS_RESOLVED;
                emit(id, CmEvents.ADDR_RESOLVED, 0);
            }
        }
    }

    /**
     * rdma_resolve_route: a path query to the node that owns the address (InfiniBand's path record
     * from the subnet administrator, a round trip over the fabric), whose answer names its LID;
     * ROUTE_RESOLVED then, ROUTE_ERROR when it never comes.
     */
    public IdView resolveRoute(long channelId, long key, String caller, int idNumber) {
        return onId(channelId, key, caller, idNumber, id -> {
            if (id.state != CmId.State.ADDRESS_RESOLVED) {
                throw new CmException(CmException.Code.INVALID, "rdma_resolve_route: id " + id.id + " is " + id.state
                        + "; resolve its address first");
            }
            id.state = CmId.State.ROUTE_QUERY;
            requests.sendUntilAnswered(id, CmMessage.newBuilder().setKind(CmMessage.Kind.ROUTE_QUERY).setLocalId(id.id)
                    .setAddress(ByteString.copyFrom(id.dst)).build(), () -> {
                        id.state = CmId.State.ADDRESS_RESOLVED;
                        emit(id, CmEvents.ROUTE_ERROR, -CmEvents.ETIMEDOUT);
                    });
        });
    }

    private void routeAnswered(String from, CmMessage answer) {
        CmId id = ids.get(answer.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.state != CmId.State.ROUTE_QUERY) {
            return;
        }
        requests.cancel(id);
        id.peerLid = answer.getLid();
        id.state = CmId.State.ROUTE_RESOLVED;
        emit(id, CmEvents.ROUTE_RESOLVED, 0);
    }

    /**
     * rdma_join_multicast: a UDP or IPoIB id with an address joins the group {@code group}; the
     * library maps the group to {@code lid} (the same on every node) and attaches the id's pair on
     * MULTICAST_JOIN, which follows at once: the groups are the fabric's, no manager admits members.
     */
    public IdView joinMulticast(long channelId, long key, String caller, int idNumber, byte[] group, int lid) {
        return onId(channelId, key, caller, idNumber, id -> {
            if (id.portSpace != CmEvents.PS_UDP && id.portSpace != CmEvents.PS_IPOIB) {
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
            outbox.event(id.channel, new CmEvents.Event(CmEvents.MULTICAST_JOIN, id.id, 0, 0, id.remote, id.src, id.srcPort, group, 0, nodeId,
                    lid, id.portSpace, id.qpType));
        });
    }

    /** rdma_leave_multicast: nothing to undo here (the library detaches the pair); checks the id is the caller's. */
    public IdView leaveMulticast(long channelId, long key, String caller, int idNumber, byte[] group) {
        return onId(channelId, key, caller, idNumber, id -> {
            if ((group.length != 4 && group.length != 16) || !isMulticast(group)) {
                throw new CmException(CmException.Code.ADDRESS_NOT_AVAILABLE, "rdma_leave_multicast: " + show(group) + " is no multicast address");
            }
        });
    }

    /** rdma_listen: the id's port takes connection requests (SIDR requests for UDP ids). */
    public IdView listen(long channelId, long key, String caller, int idNumber, int backlog) {
        return onId(channelId, key, caller, idNumber, id -> {
            if (id.state == CmId.State.IDLE) {
                ids.take(id, 0);
                id.src = address.clone();
            } else if (id.state != CmId.State.BOUND) {
                throw new CmException(CmException.Code.INVALID, "rdma_listen: id " + id.id + " is " + id.state + "; bind it, unconnected");
            }
            id.state = CmId.State.LISTEN;
            id.backlog = backlog <= 0 ? 1024 : backlog;
        });
    }

    /** rdma_connect: sends the REQ (SIDR_REQ for UDP ids) to the service at the resolved address. */
    public IdView connect(long channelId, long key, String caller, int idNumber, CmEvents.Params params) {
        return onId(channelId, key, caller, idNumber, id -> connections.connect(id, params));
    }

    /** rdma_accept on an id a CONNECT_REQUEST made: sends the REP (SIDR_REP for UDP ids). */
    public IdView accept(long channelId, long key, String caller, int idNumber, CmEvents.Params params) {
        return onId(channelId, key, caller, idNumber, id -> connections.accept(id, params));
    }

    /** rdma_reject on an id a CONNECT_REQUEST made: the peer sees REJECTED with the private data. */
    public IdView reject(long channelId, long key, String caller, int idNumber, byte[] privateData) {
        return onId(channelId, key, caller, idNumber, id -> connections.reject(id, privateData));
    }

    /** rdma_establish: the active side's program connected its queue pair itself; the RTU tells the passive side. */
    public IdView establish(long channelId, long key, String caller, int idNumber) {
        return onId(channelId, key, caller, idNumber, connections::establish);
    }

    /** rdma_disconnect: sends the DREQ; both sides see DISCONNECTED. */
    public IdView disconnect(long channelId, long key, String caller, int idNumber) {
        return onId(channelId, key, caller, idNumber, connections::disconnect);
    }

    /** rdma_migrate_id: the id's later events go to another channel of the same caller. */
    public IdView migrate(long channelId, long key, String caller, int idNumber, long toChannel, long toKey) {
        return outbox.locked(() -> {
            CmChannel from = channel(channelId, key, caller);
            CmId id = id(from, idNumber);
            CmChannel to = channel(toChannel, toKey, caller);
            id.channel = to;
            return view(id);
        });
    }

    /** rdma_destroy_id: ends what the id was doing (a connection is disconnected, a listen refuses later requests). */
    public void destroy(long channelId, long key, String caller, int idNumber) {
        outbox.locked(() -> destroy(id(channel(channelId, key, caller), idNumber)));
    }

    private void destroy(CmId id) {
        requests.cancel(id);
        if (id.state == CmId.State.LISTEN) {
            // Requests not yet accepted die with their listen: their peers see REJECTED.
            for (CmId pending : List.copyOf(id.pending)) {
                destroy(pending);
            }
        }
        connections.abandon(id);
        if (id.resolvingAddress != null) {
            List<CmId> waiting = resolving.get(id.resolvingAddress);
            if (waiting != null) {
                waiting.remove(id);
            }
        }
        ids.remove(id);
        id.state = CmId.State.DESTROYED;
    }

    private void emit(CmId id, int type, int status) {
        outbox.event(id, type, status, 0);
    }

    // ---- the wire ----

    /** A message from a peer's manager (or this node's own, for a connection within the node). */
    public void received(String from, byte[] payload) {
        CmMessage message;
        try {
            message = CmMessage.parseFrom(payload);
        } catch (InvalidProtocolBufferException e) {
            outbox.locked(() -> counters.malformed++);
            LOG.log(System.Logger.Level.DEBUG, "a malformed CM message from " + from + ": " + e.getMessage());
            return;
        }
        outbox.locked(() -> {
            if (closed) {
                return;
            }
            switch (message.getKind()) {
                case ADDRESS_QUERY -> {
                    if (Arrays.equals(message.getAddress().toByteArray(), address)) {
                        outbox.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.ADDRESS_ANSWER).setAddress(message.getAddress()).build());
                    }
                }
                case ADDRESS_ANSWER -> addressAnswered(from, message.getAddress().toByteArray());
                case ROUTE_QUERY -> {
                    if (Arrays.equals(message.getAddress().toByteArray(), address) || isLocalHost(message.getAddress().toByteArray())) {
                        outbox.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.ROUTE_ANSWER).setRemoteId(message.getLocalId()).setLid(lid)
                                .build());
                    }
                }
                case ROUTE_ANSWER -> routeAnswered(from, message);
                default -> {
                    if (!connections.received(from, message)) {
                        counters.malformed++;
                    }
                }
            }
        });
    }

    /** A peer node's process restarted: its connections end ({@link IbCm#peerRestarted}) and what it answered for is forgotten. */
    public void peerRestarted(String peer) {
        outbox.locked(() -> {
            connections.peerRestarted(peer);
            neighbours.values().removeIf(peer::equals);
        });
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

    /** IPv4 224.0.0.0/4 or IPv6 ff00::/8. */
    private static boolean isMulticast(byte[] ip) {
        return ip.length == 4 ? (ip[0] & 0xF0) == 0xE0 : ip.length == 16 && (ip[0] & 0xFF) == 0xFF;
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
    public int idCount() {
        return outbox.locked(ids::size);
    }

    /** Whether an id listens on {@code port} (tests wait for a server program's listen, not just its first id). */
    public boolean listensOn(int port) {
        return outbox.locked(() -> ids.all().stream().anyMatch(id -> id.state == CmId.State.LISTEN && id.srcPort == port));
    }

    public int channelCount() {
        return outbox.locked(channels::size);
    }

    /** The node is going down: every channel's ids are destroyed (peers see DISCONNECTED), every channel told once its events are out. */
    @Override
    public void close() {
        List<CmChannel> open = outbox.locked(() -> {
            if (closed) {
                return List.<CmChannel>of();
            }
            List<CmChannel> all = List.copyOf(channels.values());
            for (CmChannel channel : all) {
                closeChannelLocked(channel.id);
            }
            closed = true;
            return all;
        });
        for (CmChannel channel : open) {
            channel.sink.close();
        }
    }
}
