package io.pagewire.node.cm;

/**
 * The numbers rdma_cm programs and the manager share, as librdmacm and ibverbs define them (events,
 * their statuses, port spaces, queue pair types, reject reasons), and what an event carries.
 */
public final class CmEvents {
    public static final int ADDR_RESOLVED = 0;
    public static final int ADDR_ERROR = 1;
    public static final int ROUTE_RESOLVED = 2;
    public static final int ROUTE_ERROR = 3;
    public static final int CONNECT_REQUEST = 4;
    public static final int CONNECT_RESPONSE = 5;
    public static final int CONNECT_ERROR = 6;
    public static final int UNREACHABLE = 7;
    public static final int REJECTED = 8;
    public static final int ESTABLISHED = 9;
    public static final int DISCONNECTED = 10;
    public static final int DEVICE_REMOVAL = 11;
    public static final int MULTICAST_JOIN = 12;
    public static final int TIMEWAIT_EXIT = 15;

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

    /** Linux's errno values the events' statuses carry, negated. */
    public static final int ECONNRESET = 104;
    public static final int ETIMEDOUT = 110;
    public static final int ECONNREFUSED = 111;

    private CmEvents() {
    }

    /** rdma_conn_param as it travels: private data, resources, retry counts, and the queue pair it is for. */
    public record Params(byte[] privateData, int responderResources, int initiatorDepth, int retryCount, int rnrRetryCount, boolean srq,
            boolean flowControl, int qpn, int psn, int qkey) {
        public static final Params NONE = new Params(new byte[0], 0, 0, 0, 0, false, false, 0, 0, 0);

        public Params {
            privateData = privateData == null ? new byte[0] : privateData.clone();
        }
    }

    /**
     * One event for a program: its type, the id it is for (and for CONNECT_REQUEST the listen that took
     * it), its status, the peer's parameters, the id's addresses, and the peer's node and LID.
     */
    public record Event(int type, int id, int listenId, int status, Params remote, byte[] src, int srcPort, byte[] dst, int dstPort,
            String peerNode, int peerLid, int portSpace, int qpType) {
        public Event {
            remote = remote == null ? Params.NONE : remote;
            src = src.clone();
            dst = dst.clone();
        }
    }
}
