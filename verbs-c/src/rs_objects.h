/*
 * What the rsockets files share (rsocket.c: the calls, streams over RC, rpoll; rsocket_dgram.c:
 * datagrams over UD; rsocket_core.c, below both: the table, pairs, progress, waiting): an rsocket's
 * state and the core's helpers.
 */
#ifndef PAGEWIRE_VERBS_RS_OBJECTS_H
#define PAGEWIRE_VERBS_RS_OBJECTS_H

#include "cm_objects.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

#include <rdma/rsocket.h>

#define RS_MSG 65536            /* bytes per message and per buffer */
#define RS_DEFAULT_BUFFERS 16   /* receive buffers and send slots: 1 MiB each way */
#define RS_MIN_BUFFERS 16
#define RS_MAX_BUFFERS 256
#define RS_RESERVED 8           /* receives kept for control messages: CREDITs in flight (< 4) and a FIN */
#define RS_MAX_FD 65536
#define RS_MAX_MAPS 16

#define RS_IMM_TYPE(imm) ((imm) >> 28)
#define RS_IMM_VALUE(imm) ((imm) & 0x0fffffffu)
enum { RS_CREDIT = 1, RS_FIN = 2, RS_IOMAP = 3 };
/* What a wr_id says (an error completion's opcode is undefined): a receive's buffer, a control message, a slot. */
#define RS_RECV_WR ((uint64_t)1 << 62)
#define RS_CTRL_WR ((uint64_t)1 << 61)
#define RS_INDEX(wr_id) ((int)((wr_id) & 0xffffffu))

enum rs_state { RS_NEW, RS_BOUND, RS_LISTENING, RS_RESOLVING_ADDR, RS_RESOLVING_ROUTE, RS_CONNECTING, RS_ACCEPTING, RS_CONNECTED,
		RS_CLOSED, RS_FAILED };

/* What the connection's private data carries. */
struct rs_hello {
	uint8_t version;
	uint8_t reserved[3];
	uint32_t buffers; /* receive buffers posted, network order */
};

/* The payload of an IOMAP message: a window the peer may riowrite into. */
struct rs_window {
	uint64_t offset, address, length;
	uint32_t rkey, pad;
};

/* A request a listening rsocket took from its channel and holds until raccept. */
struct rs_request {
	struct rdma_cm_id *id;
	uint32_t peer_buffers;
	struct rs_request *next;
};

struct rsock;

/* What an rsocket's type does with what the core takes for it (rsocket.c: streams; rsocket_dgram.c: datagrams). */
struct rs_ops {
	void (*on_receive)(struct rsock *rs, struct ibv_wc *wc);
	/* a connection request on the socket's channel; true when the core is to destroy its id after the ack */
	int (*on_request)(struct rsock *rs, struct rdma_cm_event *ev);
	void (*on_event)(struct rsock *rs, struct rdma_cm_event *ev);
	int (*readable)(struct rsock *rs);
	int (*writable)(struct rsock *rs);
};

struct rsock {
	int fd;
	int type;
	const struct rs_ops *ops;
	pthread_mutex_t lock;
	struct rdma_event_channel *channel;
	struct rdma_cm_id *id;
	enum rs_state state;
	int error;                       /* SO_ERROR, once */
	int nonblocking;
	int shut_read, shut_write, fin_sent, peer_fin;
	/* options */
	int sndbuf, rcvbuf, nodelay, keepalive, keepidle, reuseaddr, inline_size, iomap_size;
	struct linger linger;
	/* listening */
	struct rs_request *requests, **requests_tail;
	int backlog, queued;
	/* connected: verbs */
	struct ibv_pd *own_pd;           /* when the id came without the device's PD */
	struct ibv_comp_channel *completions;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int rcount, scount;
	uint8_t *rbuf, *sbuf;
	size_t each, rbuf_size, sbuf_size;  /* bytes per buffer; all of them */
	struct ibv_mr *rmr, *smr;
	/* receive buffers holding data, in arrival order: index, length, bytes read */
	struct rs_filled { int index; uint32_t length, read; uint32_t src_qp; uint16_t slid; } *filled;
	int filled_head, filled_count;
	int freed;                      /* buffers given back since the last CREDIT */
	int credits;                    /* data messages this side may still send */
	int *free_slots, free_count;    /* send slots */
	int controls_in_flight;         /* control messages posted and not yet completed */
	/* riomap */
	struct rs_map { off_t offset; void *address; size_t length; struct ibv_mr *mr; } local[RS_MAX_MAPS];
	struct rs_window remote[RS_MAX_MAPS];
	int remote_count;
	/* datagrams (rsocket_dgram.c) */
	struct ds_dest *dests;          /* destinations resolved or learned, newest first */
	struct ds_dest *peer;           /* rconnect's, for rsend and rrecv */
	uint32_t max_datagram;          /* the largest payload: the path MTU less the header */
	struct sockaddr_storage self;   /* the address datagrams name as their sender's */
};


/* ---- the core (rsocket_core.c) ---- */
int rs_fail(int e);
/* The rsocket of a descriptor, or NULL; rs_forget takes it out of the table. */
struct rsock *rs_get(int fd);
void rs_forget(int fd);
/* A new rsocket around a channel and an id (made by the caller); NULL with errno on failure. */
struct rsock *rs_alloc(struct rdma_event_channel *channel, struct rdma_cm_id *id, int type, const struct rs_ops *ops);
void rs_set_nonblocking_channel(struct rsock *rs);
void *rs_map_buffers(size_t bytes);
int rs_make_pair(struct rsock *rs, enum ibv_qp_type type, uint32_t extra_sends, size_t each);
void rs_free_pair(struct rsock *rs);
int rs_post_receive(struct rsock *rs, int index);
/* The connection broke: the socket fails with `e` (SO_ERROR), once. */
void rs_broken(struct rsock *rs, int e);
/* Takes what came without waiting: completions, then connection events. Under rs->lock. */
void rs_progress(struct rsock *rs);
/* The poll(2) events of an rsocket now; the descriptors that wake it (its CQ armed), at most two; their notifications drained. */
short rs_events(struct rsock *rs);
int rs_wakers(struct rsock *rs, struct pollfd *out);
void rs_ack_notifications(struct rsock *rs);
int64_t rs_now_ms(void);
/* Waits (rs->lock held, released while waiting) until ready(rs) or the timeout (ms, -1: none); ETIMEDOUT. */
int rs_wait(struct rsock *rs, int (*ready)(struct rsock *), int timeout);

/* ---- datagram rsockets (rsocket_dgram.c); each runs under rs->lock ---- */
extern const struct rs_ops ds_ops;
int ds_bind(struct rsock *rs, const struct sockaddr *addr);
int ds_connect(struct rsock *rs, const struct sockaddr *addr);
ssize_t ds_sendv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *to);
ssize_t ds_recvv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *from, socklen_t *fromlen);
int ds_peer_name(struct rsock *rs, struct sockaddr *addr, socklen_t *addrlen);
void ds_free(struct rsock *rs);

#endif
