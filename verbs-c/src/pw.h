/*
 * Pagewire's verbs library: the parts its files share. The library stands in for libibverbs: a verbs
 * program's calls become calls on a Pagewire node (over the node's verbs socket, see wire.c), its
 * work requests and completions pass through the session's rings in shared memory (ring.c), and its
 * registered memory is the node's frames mapped at the program's own addresses (memory.c).
 *
 * This header holds the library's objects (as rxe.h holds rxe's): their structs, the casts between them
 * and verbs' types, and logging. What each file gives the others is declared in that file's own header
 * (wire.h, ring.h, settings.h, trace.h, memory.h, pages.h, pager.h, events.h, cq.h, qp.h, post.h, pd.h,
 * stack.h), included where it is called.
 */
#ifndef PAGEWIRE_VERBS_PW_H
#define PAGEWIRE_VERBS_PW_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "verbs.pb-c.h"
#include "layout.h"
#include "table.h"

#ifndef EXPORT
#define EXPORT __attribute__((visibility("default")))
#endif

/* What the device offers (ibv_query_device), and what the node's records carry. */
#define PW_MAX_INLINE 1024
#define PW_MAX_SGE PW_LIST_MAX_ELEMENTS
#define PW_MAX_WR (1 << 14)

#define PW_MAX_DEVICES 8

/* ---- logging: PAGEWIRE_VERBS_LOG=error|warn|info|debug (default warn), to stderr ---- */
enum pw_level { PW_ERROR = 0, PW_WARN = 1, PW_INFO = 2, PW_DEBUG = 3 };
void pw_log(enum pw_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- wire.c: the node's verbs socket ---- */

/* One connection to the node's verbs socket. */
struct pw_conn {
	int fd;
	pthread_mutex_t lock;
};

/* ---- ring.c: Agrona many-to-one ring buffers, as the ring module lays them out ---- */

struct pw_ring {
	uint8_t *buffer;   /* capacity bytes of records, then the trailer */
	int32_t capacity;
	int32_t max_message;
};

/*
 * Page runs (first, end pairs) in memory of their own (mmap, grown by mremap), never the heap: what is
 * kept under fault_lock, which the pager waits for while a program thread it serves may hold the
 * malloc's locks.
 */
struct pw_runs {
	uint64_t *pairs;
	int count, slots;
};

/* ---- the library's objects ---- */

struct pw_device {
	struct ibv_device device;
	char target[256];       /* as PAGEWIRE_NODE named it */
	char socket_path[512];  /* the node's verbs socket */
};

struct pw_cq;
struct pw_qp;

struct pw_context {
	struct verbs_context vctx;
	struct pw_device *dev;
	struct pw_conn control;    /* unary calls, one at a time */
	struct pw_conn session;    /* the session stream */
	struct pw_conn pager_conn; /* the pager's own: it never waits for a call a program thread made */
	uint32_t endpoint_id;
	uint64_t session_key;
	char node_id[128];
	uint32_t page_size;
	uint32_t mtu;
	uint32_t lid;
	uint32_t initial_credits;
	Pagewire__Verbs__V1__DescribeNodeResponse *node;

	/* shared memory */
	uint8_t *rings_base;
	size_t rings_bytes;
	struct pw_ring requests;
	struct pw_ring events;
	int bell_fd;
	int bell_sleepers;              /* pollers sleeping on the bell (cq.c): the reader thread leaves its bytes to them */
	uint64_t polls_empty_since_ns;  /* when the context's CQ polls began to find nothing (0: the last one found some) */
	uint64_t wait_average_ns;       /* how long the context's recent empty periods lasted until a completion (cq.c: it follows the longer ones) */
	uint64_t delivered;             /* completions put into any of the context's CQs */
	uint64_t delivered_seen;        /* `delivered` when the polls began to find nothing */
	uint64_t poll_sleeps;           /* empty polls that slept on the bell */
	uint64_t poll_wakes;            /* of those, the ones the bell woke (the rest slept their time out) */
	uint64_t stream_doorbells;      /* doorbells sent on the session stream for want of a bell (each a slower path) */
	int memory_fd;
	uint64_t frames_offset;
	pthread_mutex_t post_lock;   /* writers of the request ring */
	pthread_mutex_t event_lock;  /* the one reader of the event ring */

	/* what completions are routed by */
	pthread_mutex_t qp_lock;
	struct pw_table qps;         /* struct pw_qp */
	struct pw_table srqs;        /* struct pw_srq, by the node's SRQ id, for its events */

	/* registered memory (memory.c) */
	pthread_mutex_t mr_lock;     /* recursive: a fault inside the library's own copy is served on the same thread */
	pthread_mutex_t fault_lock;  /* orders unmapping (for the node) against mapping back (for the program) */
	int implicit_registrations;  /* live implicit (whole address space) registrations: posts map what they name */
	/*
	 * The extents the library maps from the node's memory (registrations, from before their pages are
	 * mapped until after they are given back), under extent_lock, which is never held across a call: what
	 * the fault handler and the node's unmap requests go by.
	 */
	pthread_mutex_t extent_lock;
	uint64_t *extents;           /* first, end pairs */
	int extent_count, extent_slots;
	/* pages being given back to the program (deregistration): unmap requests for them wait in `deferred` */
	uint64_t shield_first, shield_end;
	struct pw_runs deferred;     /* first, end pairs */
	/* runs of pages taken away from the program for the node, under fault_lock (pager.c) */
	struct pw_runs away;
	int minor_faults;            /* its pages taken away are caught with userfaultfd (else the handler) */
	uint64_t frozen_first, frozen_end; /* the handler's way of pw_freeze: writes there are held (atomic) */
	struct pw_table mrs;         /* struct pw_mr, under mr_lock */
	struct pw_pd *pds;           /* under qp_lock */

	pthread_t reader;            /* reads the session stream: events the rings could not take */
	int reader_started;
	volatile int closing;
	volatile int port_down;      /* the node ended the session: the port reports DOWN */
	int async_pipe[2];
};

#define PW_MR_TYPE_MR 0

/* A memory region; it begins as rdma-core's verbs_mr does (the region, its type, its access), for code that reads those. */
struct pw_mr {
	struct ibv_mr mr;
	int mr_type;      /* rdma-core's enum ibv_mr_type: PW_MR_TYPE_MR (0) */
	int access;
	uint64_t first;   /* page-aligned extent mapped for it */
	uint64_t end;
	int implicit;
};

/* A completion as a CQ keeps it: the work completion and when the node handed it over (CLOCK_MONOTONIC ns). */
struct pw_cqe {
	struct ibv_wc wc;
	uint64_t time_ns;
};

struct pw_wc_queue {
	struct pw_cqe *entries;
	int capacity, head, count;
};

#define PW_MAX_CQE (1 << 22)

struct pw_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;  /* the same leading fields; a CQ from ibv_create_cq_ex fills the rest */
	};
	pthread_mutex_t lock;        /* the queue, armed; held from ibv_start_poll to ibv_end_poll */
	struct pw_wc_queue queue;    /* cq.cqe entries: a completion that finds it full is lost, and IBV_EVENT_CQ_ERR says so */
	struct pw_cqe current;       /* the completion ibv_start_poll / ibv_next_poll made current */
	int ignore_overrun;          /* IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: an overflow raises no event */
	int users;                   /* queue pairs completing into it: it cannot be destroyed while any does */
	int armed;                   /* 0, or ARMED_NEXT / ARMED_SOLICITED (ibv_req_notify_cq) */
	uint64_t empty_since_ns;     /* when polls of it began to find nothing (0: the last one found something) */
};

/* The work requests ibv_wr_* gathers between ibv_wr_start and ibv_wr_complete (post.c). */
struct pw_wr_batch {
	struct ibv_send_wr *wrs;     /* cap.max_send_wr of them */
	struct ibv_sge *sges;        /* cap.max_send_sge (at least 1) per request */
	uint8_t *inline_data;        /* cap.max_inline_data per request: inline data is copied when it is set */
	int count;
	int error;                   /* the first error since ibv_wr_start, which ibv_wr_complete returns */
};

struct pw_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;  /* the same ibv_qp first; a pair from ibv_create_qp_ex with send ops fills the rest */
	};
	struct pw_wr_batch *batch;   /* NULL unless the pair was made for ibv_wr_* */
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr;     /* what modify_qp set, for query_qp */
	int sq_sig_all;
	/* inline data: one slot of cap.max_inline_data bytes per send queue entry, registered */
	uint8_t *inline_buf;
	struct ibv_mr *inline_mr;
	uint32_t inline_next;
	pthread_mutex_t modify_lock; /* one state change at a time */
	int sqd_notify;              /* the drain under way was asked to end with IBV_EVENT_SQ_DRAINED */
	uint32_t receives_posted;    /* posted and not completed (atomic): at cap.max_recv_wr a post is ENOMEM */
};

static inline void pw_cq_use(struct ibv_cq *cq, int delta)
{
	if (cq)
		__atomic_add_fetch(&((struct pw_cq *)cq)->users, delta, __ATOMIC_ACQ_REL);
}

/* An address handle: where a UD SEND goes, by LID (and, when global, the GID its GRH names). */
struct pw_ah {
	struct ibv_ah ah;
	uint16_t dlid;
	int global;
};

struct pw_srq {
	struct ibv_srq srq;
	uint32_t srq_id;
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t limit;
	int users;                   /* queue pairs drawing from it: it cannot be destroyed while any does */
	uint32_t receives_posted;    /* posted and not completed (atomic): at max_wr a post is ENOMEM */
};

/* A protection domain and how many objects use it (MRs, QPs, SRQs, MWs): it cannot go while any does. */
struct pw_pd {
	struct ibv_pd pd;
	int users;
	struct pw_pd *prev, *next; /* the context's PDs: what close frees if the program did not */
};

static inline void pw_pd_use(struct ibv_pd *pd, int delta)
{
	__atomic_add_fetch(&((struct pw_pd *)pd)->users, delta, __ATOMIC_ACQ_REL);
}

struct pw_channel {
	struct ibv_comp_channel channel;
	int write_fd;
};

enum { PW_ARMED_NEXT = 1, PW_ARMED_SOLICITED = 2 };

static inline struct pw_context *pw_ctx(struct ibv_context *c)
{
	return (struct pw_context *)((uint8_t *)c - offsetof(struct pw_context, vctx.context));
}

/* A word of the ring file's header (layout.h's PW_RINGS_*). */
static inline int32_t *pw_ring_word(struct pw_context *ctx, int offset) { return (int32_t *)(ctx->rings_base + offset); }

/* A window's rights as the node counts them (its Access ordinals: layout.h's PW_RIGHT_*). */
static inline uint64_t pw_rights(unsigned int flags)
{
	return (flags & IBV_ACCESS_LOCAL_WRITE ? PW_RIGHT_LOCAL_WRITE : 0) | (flags & IBV_ACCESS_REMOTE_WRITE ? PW_RIGHT_REMOTE_WRITE : 0)
	       | (flags & IBV_ACCESS_REMOTE_READ ? PW_RIGHT_REMOTE_READ : 0)
	       | (flags & IBV_ACCESS_REMOTE_ATOMIC ? PW_RIGHT_REMOTE_ATOMIC : 0);
}

#endif
