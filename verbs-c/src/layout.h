/*
 * The layouts the library shares with the node, in one place: the node's memory file (the ring
 * module's MemoryFile), the session's ring file (SessionRings), the records on its two rings (PostRecord, PostReceiveRecord,
 * ScatterGatherRecord, CompletionRecord, RefusedRecord, CpuUnmapRecord) and the wire numbers of
 * verbs.proto's opcodes and statuses. Fields are in the host's byte order, at the offsets below; the
 * Java classes' diagrams are the reference, and pagewire-layout-check (RecordLayoutTest) checks the
 * two sides against each other both ways.
 */
#ifndef PAGEWIRE_VERBS_LAYOUT_H
#define PAGEWIRE_VERBS_LAYOUT_H

/* ---- the node's memory file: a header, every frame's state and guard words, then the frames ------- */

#define PW_MEMORY_MAGIC 0x3130304D454D5750ull /* "PWMEM001" */
#define PW_MEMORY_PAGE_SIZE 8                 /* uint32: bytes per frame, a power of two */
#define PW_MEMORY_FRAME_COUNT 12              /* uint32 */
#define PW_MEMORY_STATES 16                   /* uint64: where the state words start (PW_MEMORY_HEADER) */
#define PW_MEMORY_GUARDS 24                   /* uint64: where the guard words start */
#define PW_MEMORY_FRAMES 32                   /* uint64: where frame 0 starts; frame f at + f * page size */
#define PW_MEMORY_FIELDS 40                   /* the header's fields end here; the rest of it is zero */
#define PW_MEMORY_HEADER 4096                 /* the header's length */

/* ---- the ring file ----------------------------------------------------------------------------- */

#define PW_RINGS_MAGIC 0x505752494E473032ull /* "PWRING02" */
#define PW_RINGS_NONCE 8                     /* uint64: what the program sends back to prove it maps the file */
#define PW_RINGS_CAPACITY 16                 /* int32: bytes of records per ring, a power of two */
#define PW_RINGS_NODE_ASLEEP 32              /* int32: 1 while the node's reader sleeps and wants a doorbell */
#define PW_RINGS_APP_ASLEEP 36               /* int32: 1 while the program's reader sleeps and wants a doorbell */
#define PW_RINGS_HEADER 128                  /* the request ring starts here; the event ring after its trailer */
#define PW_RING_TRAILER 768                  /* Agrona's RingBufferDescriptor.TRAILER_LENGTH */

/* ---- record types: each ring's own ------------------------------------------------------------ */

enum pw_request_type { PW_REQ_POST = 1, PW_REQ_POST_RECEIVE = 2, PW_REQ_FAULT = 3, PW_REQ_POST_LIST = 4, PW_REQ_POST_RECEIVE_LIST = 5 };
enum pw_event_type { PW_EV_COMPLETION = 1, PW_EV_REFUSED = 2, PW_EV_COUNTER = 3, PW_EV_FAULT_SERVED = 4, PW_EV_CPU_UNMAP = 5 };

/* ---- POST: a header, then work requests --------------------------------------------------------- */

#define PW_POST_HEADER 8 /* qpn (uint32), count (uint32) */
#define PW_POST_WR 72
#define PW_WR_ID 0        /* uint64 */
#define PW_WR_OPCODE 8    /* int32: the opcode in the low 16 bits, PW_FLAG_* above */
#define PW_WR_LKEY 12     /* uint32 */
#define PW_WR_LOCAL 16    /* uint64 */
#define PW_WR_LENGTH 24   /* uint32 */
#define PW_WR_COUNTER 28  /* uint32: event counter id */
#define PW_WR_REMOTE 32   /* uint64 */
#define PW_WR_RKEY 40     /* uint64 */
#define PW_WR_ADD 48      /* uint64: FETCH_ADD's addend, COMPARE_SWAP's compare */
#define PW_WR_IMM 56      /* uint32 */
#define PW_WR_SWAP 64     /* uint64 */
#define PW_FLAG_UNSIGNALED (1 << 16)
#define PW_FLAG_FENCE (1 << 17)
#define PW_FLAG_SOLICITED (1 << 18)
/*
 * A UD SEND: REMOTE holds the address handle's LID (low 16 bits) and, in bit 16, whether it is global;
 * RKEY the remote QPN (low 32 bits) and Q_Key (high 32; its high bit asks for the pair's own).
 */
#define PW_FLAG_DATAGRAM (1 << 19)
#define PW_DATAGRAM_GLOBAL (1u << 16)
/*
 * BIND_WINDOW's fields: rkey the window's new rkey, remote address and add the window's start and
 * length, counter id the region's lkey, swap the rights (PW_RIGHT_*); LOCAL_INVALIDATE's: rkey;
 * SEND_WITH_INVALIDATE's: the immediate holds the rkey to invalidate.
 */
#define PW_RIGHT_LOCAL_WRITE (1 << 0) /* the node's Access ordinals */
#define PW_RIGHT_REMOTE_WRITE (1 << 1)
#define PW_RIGHT_REMOTE_READ (1 << 2)
#define PW_RIGHT_REMOTE_ATOMIC (1 << 3)
#define PW_RIGHT_MW_BIND (1 << 4)

/* ---- POST_RECEIVE: a header, then receives ----------------------------------------------------- */

#define PW_RECV_HEADER 16 /* qpn, srq id (0: the pair's own queue), count, zero: uint32 each */
#define PW_RECV 24
#define PW_RECV_ID 0      /* uint64 */
#define PW_RECV_LKEY 8    /* uint32 */
#define PW_RECV_LENGTH 12 /* uint32 */
#define PW_RECV_ADDRESS 16 /* uint64 */

/* ---- POST_LIST and POST_RECEIVE_LIST: one request or receive with its scatter/gather list -------- */

#define PW_LIST_HEADER 16 /* qpn, srq id, element count, zero: uint32 each; then the body, then the elements */
#define PW_LIST_ELEMENT 16
#define PW_ELEMENT_LKEY 0    /* uint32 */
#define PW_ELEMENT_LENGTH 4  /* uint32 */
#define PW_ELEMENT_ADDRESS 8 /* uint64 */
#define PW_LIST_MAX_ELEMENTS 32

/* ---- COMPLETION -------------------------------------------------------------------------------- */

#define PW_COMPLETION 56 /* fixed part; the error's UTF-8 follows */
#define PW_COMPLETION_ID 0          /* uint64 */
#define PW_COMPLETION_QPN 8         /* uint32 */
#define PW_COMPLETION_OPCODE 12     /* int32: a wire opcode */
#define PW_COMPLETION_STATUS 16     /* int32: a wire status */
#define PW_COMPLETION_ERROR_LENGTH 20 /* int32 */
#define PW_COMPLETION_BYTES 24      /* uint64 */
#define PW_COMPLETION_VALUE 32      /* uint64; a UD receive's source: QPN in the low 32 bits, LID in the next 16 */
#define PW_COMPLETION_FLAGS 40      /* uint32: PW_COMPLETION_WITH_* */
#define PW_COMPLETION_IMM 44        /* uint32 */
#define PW_COMPLETION_TIME 48       /* uint64: CLOCK_MONOTONIC ns when the node put it on the ring */
#define PW_COMPLETION_WITH_IMM 1
#define PW_COMPLETION_SOLICITED 2
#define PW_COMPLETION_INVALIDATED 4
#define PW_COMPLETION_DATAGRAM 8     /* a UD receive: VALUE holds its source */
#define PW_COMPLETION_GLOBAL_ROUTE 16 /* the UD receive's first 40 bytes hold a GRH (IBV_WC_GRH) */

/* ---- REFUSED: a post the node refused ----------------------------------------------------------- */

#define PW_REFUSED 24 /* fixed part; the error's UTF-8 follows */
#define PW_REFUSED_ID 0           /* uint64 */
#define PW_REFUSED_QPN 8          /* uint32 */
#define PW_REFUSED_CODE 12        /* uint32: a gRPC status code */
#define PW_REFUSED_ERROR_LENGTH 16 /* int32 */

/* ---- CPU_UNMAP: pages the node takes back from the program -------------------------------------- */

#define PW_CPU_UNMAP 16
#define PW_CPU_UNMAP_ADDRESS 0 /* uint64 */
#define PW_CPU_UNMAP_LENGTH 8  /* uint64: bytes, whole pages */

/* ---- verbs.proto's numbers ------------------------------------------------------------------------ */

enum pw_wire_opcode {
	PW_OP_WRITE = 1, PW_OP_WRITE_WITH_NOTIFY = 2, PW_OP_READ = 3, PW_OP_FETCH_ADD = 4, PW_OP_SEND = 5, PW_OP_SEND_WITH_IMM = 6,
	PW_OP_WRITE_WITH_IMM = 7, PW_OP_RECV = 8, PW_OP_RECV_RDMA_WITH_IMM = 9, PW_OP_COMPARE_SWAP = 10, PW_OP_BIND_WINDOW = 11,
	PW_OP_LOCAL_INVALIDATE = 12, PW_OP_SEND_WITH_INVALIDATE = 13
};

enum pw_wire_status {
	PW_ST_SUCCESS = 1, PW_ST_LOCAL_PROTECTION = 2, PW_ST_REMOTE_ACCESS = 3, PW_ST_REMOTE_INVALID_REQUEST = 4,
	PW_ST_REMOTE_OPERATIONAL = 5, PW_ST_RETRY_EXCEEDED = 6, PW_ST_RNR_RETRY_EXCEEDED = 7, PW_ST_LOCAL_MEMORY = 8,
	PW_ST_FLUSHED = 9, PW_ST_LOCAL_LENGTH = 10, PW_ST_WINDOW_BIND = 11
};

#endif
