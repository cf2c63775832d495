/*
 * The verbs: libibverbs' public API on a Pagewire node. Device and context calls open a session with
 * the node the environment names; queue pairs, completion queues and registrations become the node's;
 * work requests go on the session's request ring and completions come back on its event ring, which
 * whoever polls (or the context's reader thread, for a program that sleeps on a completion channel)
 * drains into the program's completion queues.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"

/* verbs.h makes these macros around inline helpers; the library defines the functions themselves. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* wire opcodes and statuses: verbs.proto's WorkRequest.Opcode and CompletionStatus */
enum { OP_WRITE = 1, OP_READ = 3, OP_FETCH_ADD = 4, OP_SEND = 5, OP_SEND_WITH_IMM = 6, OP_WRITE_WITH_IMM = 7, OP_RECV = 8,
       OP_RECV_RDMA_WITH_IMM = 9, OP_COMPARE_SWAP = 10 };
/* ring records (ring module) */
enum { REQ_POST = 1, REQ_POST_RECEIVE = 2, REQ_POST_LIST = 4, REQ_POST_RECEIVE_LIST = 5, EV_COMPLETION = 1, EV_REFUSED = 2, EV_CPU_UNMAP = 5 };
#define LIST_HEADER 16 /* ring's ScatterGatherRecord */
#define LIST_ELEMENT 16
#define FLAG_UNSIGNALED (1 << 16) /* ring's PostRecord flags */
#define FLAG_FENCE (1 << 17)
#define FLAG_SOLICITED (1 << 18)
#define POST_HEADER 8
#define POST_WR 72
#define RECV_HEADER 16
#define RECV_WR 24
#define MAX_INLINE 1024
#define MAX_SGE 32 /* ring's ScatterGatherRecord.MAX_ELEMENTS */

#define EXPORT __attribute__((visibility("default")))

/* ---- devices ----------------------------------------------------------------------------------- */

static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static struct pw_device devices[PW_MAX_DEVICES];
static int device_count;

static void find_devices(void)
{
	const char *nodes = getenv("PAGEWIRE_NODE");
	const char *dir = getenv("PAGEWIRE_VERBS_RING_DIRECTORY");
	const char *socket_override = getenv("PAGEWIRE_VERBS_SOCKET");
	char list[1024];
	snprintf(list, sizeof(list), "%s", nodes && *nodes ? nodes : "127.0.0.1:7100");
	if (!dir || !*dir)
		dir = "/dev/shm";
	char *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t && device_count < PW_MAX_DEVICES; t = strtok_r(NULL, ",", &save)) {
		struct pw_device *d = &devices[device_count];
		memset(d, 0, sizeof(*d));
		snprintf(d->target, sizeof(d->target), "%s", t);
		if (device_count == 0 && socket_override && *socket_override) {
			snprintf(d->socket_path, sizeof(d->socket_path), "%s", socket_override);
		} else if (strchr(t, '/')) {
			snprintf(d->socket_path, sizeof(d->socket_path), "%s", t); /* the socket itself */
		} else {
			/* HOST:PORT names the node by its port, anything else by its id: the node's socket has both names */
			const char *port = strrchr(t, ':');
			snprintf(d->socket_path, sizeof(d->socket_path), "%s/pagewire-%s.verbs", dir, port ? port + 1 : t);
		}
		d->device.node_type = IBV_NODE_CA;
		d->device.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->device.name, sizeof(d->device.name), "pagewire%d", device_count);
		snprintf(d->device.dev_name, sizeof(d->device.dev_name), "uverbs%d", device_count);
		memcpy(d->device.dev_path, d->socket_path, sizeof(d->device.dev_path) - 1);
		memcpy(d->device.ibdev_path, d->socket_path, sizeof(d->device.ibdev_path) - 1);
		device_count++;
	}
}

EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	pthread_once(&devices_once, find_devices);
	struct ibv_device **list = calloc((size_t)device_count + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < device_count; i++)
		list[i] = &devices[i].device;
	if (num_devices)
		*num_devices = device_count;
	return list;
}

EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	uint64_t index = (uint64_t)((struct pw_device *)device - devices);
	return htobe64(0x0250570000000000ull | (index + 1)); /* "PW" */
}

EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return (int)((struct pw_device *)device - devices);
}

/* ---- completions: the event ring into the program's completion queues ----------------------------- */

struct pw_channel {
	struct ibv_comp_channel channel;
	int write_fd;
};

static struct pw_qp *qp_of(struct pw_context *ctx, uint32_t qpn)
{
	struct pw_qp *found = NULL;
	pthread_mutex_lock(&ctx->qp_lock);
	for (int i = 0; i < ctx->qp_slots; i++) {
		if (ctx->qps[i] && ctx->qps[i]->qp.qp_num == qpn) {
			found = ctx->qps[i];
			break;
		}
	}
	pthread_mutex_unlock(&ctx->qp_lock);
	return found;
}

/* Queues an asynchronous event for ibv_get_async_event. */
static void queue_async_event(struct pw_context *ctx, const struct ibv_async_event *ae)
{
	if (write(ctx->async_pipe[1], ae, sizeof(*ae)) != sizeof(*ae))
		pw_log(PW_ERROR, "cannot queue an asynchronous event: %s", strerror(errno));
}

enum { ARMED_NEXT = 1, ARMED_SOLICITED = 2 };

/*
 * Puts a completion on its CQ, which holds cq.cqe of them: one that finds it full is lost and the CQ's
 * owner hears IBV_EVENT_CQ_ERR, as from an HCA (and Soft-RoCE). A CQ armed for solicited events only is
 * woken by a solicited receive or an error.
 */
static void cq_push(struct pw_context *ctx, struct pw_cq *cq, const struct ibv_wc *wc, int solicited)
{
	pthread_mutex_lock(&cq->lock);
	struct pw_wc_queue *q = &cq->queue;
	if (q->count == q->capacity) {
		pthread_mutex_unlock(&cq->lock);
		pw_log(PW_ERROR, "completion queue %p overflowed its %d entries: the completion of work request 0x%lx is lost", (void *)cq,
		       q->capacity, (unsigned long)wc->wr_id);
		struct ibv_async_event ae;
		memset(&ae, 0, sizeof(ae));
		ae.event_type = IBV_EVENT_CQ_ERR;
		ae.element.cq = &cq->cq;
		queue_async_event(ctx, &ae);
		return;
	}
	q->entries[(q->head + q->count) % q->capacity] = *wc;
	q->count++;
	int notify = cq->armed == ARMED_NEXT || (cq->armed == ARMED_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS));
	if (notify)
		cq->armed = 0;
	pthread_mutex_unlock(&cq->lock);
	if (notify && cq->cq.channel) {
		struct pw_channel *ch = (struct pw_channel *)cq->cq.channel;
		struct ibv_cq *which = &cq->cq;
		if (write(ch->write_fd, &which, sizeof(which)) != sizeof(which))
			pw_log(PW_ERROR, "cannot signal a completion channel: %s", strerror(errno));
	}
}

static enum ibv_wc_status wc_status(int32_t status)
{
	switch (status) {
	case 1: return IBV_WC_SUCCESS;
	case 2: return IBV_WC_LOC_PROT_ERR;
	case 3: return IBV_WC_REM_ACCESS_ERR;
	case 4: return IBV_WC_REM_INV_REQ_ERR;
	case 5: return IBV_WC_REM_OP_ERR;
	case 6: return IBV_WC_RETRY_EXC_ERR;
	case 7: return IBV_WC_RNR_RETRY_EXC_ERR;
	case 8: return IBV_WC_LOC_ACCESS_ERR;
	case 9: return IBV_WC_WR_FLUSH_ERR;
	case 10: return IBV_WC_LOC_LEN_ERR;
	default: return IBV_WC_GENERAL_ERR;
	}
}

static enum ibv_wc_opcode wc_opcode(int32_t opcode)
{
	switch (opcode) {
	case OP_WRITE:
	case OP_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case OP_READ: return IBV_WC_RDMA_READ;
	case OP_FETCH_ADD: return IBV_WC_FETCH_ADD;
	case OP_COMPARE_SWAP: return IBV_WC_COMP_SWAP;
	case OP_RECV: return IBV_WC_RECV;
	case OP_RECV_RDMA_WITH_IMM: return IBV_WC_RECV_RDMA_WITH_IMM;
	default: return IBV_WC_SEND;
	}
}

static void deliver(struct pw_context *ctx, uint64_t wr_id, uint32_t qpn, int32_t opcode, enum ibv_wc_status status,
		    uint32_t bytes, int has_imm, uint32_t imm, int solicited, const char *error, int error_length, uint32_t vendor_err)
{
	struct pw_qp *qp = qp_of(ctx, qpn);
	if (!qp) {
		pw_log(PW_DEBUG, "a completion for queue pair %u, which is gone, is dropped", qpn);
		return;
	}
	if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR)
		pw_log(PW_WARN, "work request 0x%lx on queue pair %u failed (%s): %.*s", (unsigned long)wr_id, qpn,
		       ibv_wc_status_str(status), error_length, error ? error : "");
	/* An atomic's fetched word is already in its buffer: the node wrote it there before completing it. */
	int receive = opcode == OP_RECV || opcode == OP_RECV_RDMA_WITH_IMM;
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = status;
	wc.opcode = wc_opcode(opcode);
	wc.byte_len = bytes;
	wc.qp_num = qpn;
	wc.src_qp = qp->attr.dest_qp_num;
	wc.slid = (uint16_t)qp->attr.ah_attr.dlid;
	wc.vendor_err = vendor_err;
	if (has_imm) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = imm;
	}
	if (status != IBV_WC_SUCCESS)
		qp->qp.state = IBV_QPS_ERR; /* an error completion moves the pair to the error state, as an HCA's does */
	struct ibv_cq *cq = receive ? qp->qp.recv_cq : qp->qp.send_cq;
	if (cq)
		cq_push(ctx, (struct pw_cq *)cq, &wc, solicited);
}

/*
 * A post the node refused: its completion fails with IBV_WC_LOC_QP_OP_ERR, and vendor_err says why as
 * libibverbs' post calls would: ENOMEM for a limit (a full queue, a quota, the program's share of a
 * node-wide pool: gRPC's RESOURCE_EXHAUSTED), EINVAL for a request that is not valid.
 */
static void refused(struct pw_context *ctx, uint64_t wr_id, uint32_t qpn, uint32_t code, const char *error, int error_length)
{
	int why = code == 8 ? ENOMEM : EINVAL;
	pw_log(PW_WARN, "the node refused work request 0x%lx of queue pair %u (%s): %.*s", (unsigned long)wr_id, qpn,
	       why == ENOMEM ? "ENOMEM" : "EINVAL", error_length, error);
	deliver(ctx, wr_id, qpn, OP_SEND, IBV_WC_LOC_QP_OP_ERR, 0, 0, 0, 0, NULL, 0, (uint32_t)why);
}

static void on_event(void *arg, int32_t type, const uint8_t *b, int32_t length)
{
	struct pw_context *ctx = arg;
	if (type == EV_COMPLETION && length >= 48) {
		uint64_t wr_id, bytes;
		uint32_t qpn, flags, imm;
		int32_t opcode, status, error_length;
		memcpy(&wr_id, b, 8);
		memcpy(&qpn, b + 8, 4);
		memcpy(&opcode, b + 12, 4);
		memcpy(&status, b + 16, 4);
		memcpy(&error_length, b + 20, 4);
		memcpy(&bytes, b + 24, 8);
		memcpy(&flags, b + 40, 4);
		memcpy(&imm, b + 44, 4);
		if (error_length < 0 || error_length > length - 48)
			error_length = 0;
		deliver(ctx, wr_id, qpn, opcode, wc_status(status), (uint32_t)bytes, flags & 1, imm, (flags & 2) != 0, (const char *)b + 48,
			error_length, 0);
	} else if (type == EV_CPU_UNMAP && length >= 16) {
		uint64_t address, pages;
		memcpy(&address, b, 8);
		memcpy(&pages, b + 8, 8);
		pw_cpu_unmap(ctx, address, pages);
	} else if (type == EV_REFUSED && length >= 24) {
		/* RefusedRecord: wr id, qpn, gRPC status code, error length, (zero), error */
		uint64_t wr_id;
		uint32_t qpn, code;
		int32_t error_length;
		memcpy(&wr_id, b, 8);
		memcpy(&qpn, b + 8, 4);
		memcpy(&code, b + 12, 4);
		memcpy(&error_length, b + 16, 4);
		if (error_length < 0 || error_length > length - 24)
			error_length = 0;
		refused(ctx, wr_id, qpn, code, (const char *)b + 24, error_length);
	}
}

/* A queue pair's asynchronous event from the node, as ibv_get_async_event reports it. */
static void queue_pair_event(struct pw_context *ctx, const Pagewire__Verbs__V1__QueuePairEventRaised *raised)
{
	struct pw_qp *qp = qp_of(ctx, raised->qpn);
	if (!qp)
		return; /* destroyed meanwhile: nobody to tell */
	struct ibv_async_event ae;
	memset(&ae, 0, sizeof(ae));
	ae.element.qp = &qp->qp;
	switch (raised->kind) {
	case PAGEWIRE__VERBS__V1__QUEUE_PAIR_EVENT_RAISED__KIND__FATAL:
		ae.event_type = IBV_EVENT_QP_FATAL;
		qp->qp.state = IBV_QPS_ERR;
		break;
	case PAGEWIRE__VERBS__V1__QUEUE_PAIR_EVENT_RAISED__KIND__COMMUNICATION_ESTABLISHED:
		ae.event_type = IBV_EVENT_COMM_EST;
		break;
	case PAGEWIRE__VERBS__V1__QUEUE_PAIR_EVENT_RAISED__KIND__LAST_WQE_REACHED:
		ae.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
		break;
	case PAGEWIRE__VERBS__V1__QUEUE_PAIR_EVENT_RAISED__KIND__SEND_QUEUE_DRAINED:
		if (!qp->sqd_notify)
			return; /* the drain was not asked to say so (en_sqd_async_notify) */
		ae.event_type = IBV_EVENT_SQ_DRAINED;
		break;
	default:
		return; /* a kind this library does not know: a newer node */
	}
	queue_async_event(ctx, &ae);
}

/* Moves what the event ring holds into the completion queues; one drainer at a time, the others go on. */
static void drain(struct pw_context *ctx)
{
	if (pthread_mutex_trylock(&ctx->event_lock))
		return;
	while (pw_ring_read(&ctx->events, on_event, ctx, 256) > 0)
		;
	pthread_mutex_unlock(&ctx->event_lock);
}

/* Events the rings could not take come on the session stream (a full event ring, an SRQ's limit). */
static void on_session_event(struct pw_context *ctx, Pagewire__Verbs__V1__SessionEvent *ev)
{
	switch (ev->event_case) {
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_COMPLETIONS:
		drain(ctx); /* what the ring holds came first */
		for (size_t i = 0; i < ev->completions->n_completions; i++) {
			Pagewire__Verbs__V1__CompletionEvent *c = ev->completions->completions[i];
			deliver(ctx, c->wr_id, c->qpn, c->opcode, wc_status(c->status), (uint32_t)c->bytes, c->has_immediate, c->immediate,
				c->solicited, c->error, (int)strlen(c->error), 0);
		}
		break;
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_COMPLETION: {
		Pagewire__Verbs__V1__CompletionEvent *c = ev->completion;
		drain(ctx);
		deliver(ctx, c->wr_id, c->qpn, c->opcode, wc_status(c->status), (uint32_t)c->bytes, c->has_immediate, c->immediate,
			c->solicited, c->error, (int)strlen(c->error), 0);
		break;
	}
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_REFUSED:
		drain(ctx);
		refused(ctx, ev->refused->wr_id, ev->refused->qpn, ev->refused->code, ev->refused->error, (int)strlen(ev->refused->error));
		break;
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_async_event ae;
		memset(&ae, 0, sizeof(ae));
		ae.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		ae.element.srq = NULL;
		/* the srq pointer is found by its id */
		extern struct ibv_srq *pw_srq_of(struct pw_context *, uint32_t);
		ae.element.srq = pw_srq_of(ctx, ev->srq_limit_reached->srq_id);
		if (ae.element.srq)
			queue_async_event(ctx, &ae);
		break;
	}
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_QUEUE_PAIR_EVENT:
		drain(ctx); /* completions before it first */
		queue_pair_event(ctx, ev->queue_pair_event);
		break;
	default:
		drain(ctx); /* a doorbell */
		break;
	}
}

/* The header words of the ring file (ring's SessionRings). */
static inline int32_t *ring_word(struct pw_context *ctx, int offset) { return (int32_t *)(ctx->rings_base + offset); }
#define NODE_ASLEEP 32
#define APP_ASLEEP 36

static int armed_cqs;         /* completion queues armed across contexts (a hint for the reader) */

static void *reader_main(void *arg)
{
	struct pw_context *ctx = arg;
	while (!ctx->closing) {
		int armed = __atomic_load_n(&armed_cqs, __ATOMIC_ACQUIRE) > 0;
		if (armed) {
			/* Someone sleeps on a channel: have the node ring the bell, then look once more. */
			__atomic_store_n(ring_word(ctx, APP_ASLEEP), 1, __ATOMIC_SEQ_CST);
			drain(ctx);
		}
		struct pollfd fds[2] = { { .fd = ctx->session.fd, .events = POLLIN }, { .fd = ctx->bell_fd, .events = POLLIN } };
		/* Awake now and then even when no one waits on a channel: the node's unmap requests must not wait for a poll. */
		int n = poll(fds, ctx->bell_fd >= 0 ? 2 : 1, armed ? 50 : 5);
		if (n < 0 && errno != EINTR)
			break;
		if (ctx->bell_fd >= 0 && (fds[1].revents & POLLIN)) {
			char sink[64];
			if (read(ctx->bell_fd, sink, sizeof(sink)) <= 0) {
				close(ctx->bell_fd);
				ctx->bell_fd = -1;
			}
		}
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			Pagewire__Verbs__V1__SessionEvent *ev = pw_session_next(&ctx->session);
			if (!ev) {
				if (!ctx->closing) {
					pw_log(PW_ERROR, "the node closed the session of %s", ctx->dev->device.name);
					/* The port is gone with the node, then the device: what a program sees of an HCA that died. */
					struct ibv_async_event ae;
					memset(&ae, 0, sizeof(ae));
					ae.event_type = IBV_EVENT_PORT_ERR;
					ae.element.port_num = 1;
					queue_async_event(ctx, &ae);
					memset(&ae, 0, sizeof(ae));
					ae.event_type = IBV_EVENT_DEVICE_FATAL;
					queue_async_event(ctx, &ae);
					ctx->port_down = 1;
				}
				break;
			}
			on_session_event(ctx, ev);
			protobuf_c_message_free_unpacked(&ev->base, NULL);
		}
		drain(ctx);
	}
	return NULL;
}

/* ---- opening a device: the session, its rings and the node's memory ------------------------------ */

static Pagewire__Verbs__V1__SessionEvent *expect(struct pw_context *ctx, Pagewire__Verbs__V1__SessionEvent__EventCase which)
{
	for (;;) {
		Pagewire__Verbs__V1__SessionEvent *ev = pw_session_next(&ctx->session);
		if (!ev || ev->event_case == which)
			return ev;
		protobuf_c_message_free_unpacked(&ev->base, NULL);
	}
}

static int attach_rings(struct pw_context *ctx)
{
	Pagewire__Verbs__V1__SessionRequest req = PAGEWIRE__VERBS__V1__SESSION_REQUEST__INIT;
	Pagewire__Verbs__V1__AttachRings attach = PAGEWIRE__VERBS__V1__ATTACH_RINGS__INIT;
	req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_ATTACH_RINGS;
	req.attach_rings = &attach;
	int e = pw_session_send(&ctx->session, &req);
	if (e)
		return e;
	Pagewire__Verbs__V1__SessionEvent *ev = expect(ctx, PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_RINGS_OFFERED);
	if (!ev)
		return ECONNRESET;
	if (!*ev->rings_offered->path) {
		pw_log(PW_ERROR, "the node offers no rings: %s", ev->rings_offered->refusal);
		protobuf_c_message_free_unpacked(&ev->base, NULL);
		return EOPNOTSUPP;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s", ev->rings_offered->path);
	protobuf_c_message_free_unpacked(&ev->base, NULL);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	Pagewire__Verbs__V1__RingsAttached attached = PAGEWIRE__VERBS__V1__RINGS_ATTACHED__INIT;
	if (fd >= 0) {
		off_t size = lseek(fd, 0, SEEK_END);
		void *base = size > 128 ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
		close(fd);
		if (base != MAP_FAILED) {
			ctx->rings_base = base;
			ctx->rings_bytes = (size_t)size;
		}
	}
	if (!ctx->rings_base) {
		attached.failure = "cannot map the ring file";
	} else {
		int32_t capacity;
		memcpy(&attached.nonce, ctx->rings_base + 8, 8);
		memcpy(&capacity, ctx->rings_base + 16, 4);
		pw_ring_init(&ctx->requests, ctx->rings_base + 128, capacity);
		pw_ring_init(&ctx->events, ctx->rings_base + 128 + capacity + 768, capacity);
	}
	req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_RINGS_ATTACHED;
	req.rings_attached = &attached;
	e = pw_session_send(&ctx->session, &req);
	if (e || !ctx->rings_base)
		return e ? e : EIO;
	ev = expect(ctx, PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_RINGS_ACTIVE);
	if (!ev)
		return ECONNRESET;
	if (!*ev->rings_active->memory_path) {
		pw_log(PW_ERROR, "the node does not share its memory (its physical memory is not in a file programs can map)");
		protobuf_c_message_free_unpacked(&ev->base, NULL);
		return EOPNOTSUPP;
	}
	e = pw_memory_attach(ctx, ev->rings_active->memory_path);
	protobuf_c_message_free_unpacked(&ev->base, NULL);
	if (e)
		return e;
	/* The bell: a Unix socket beside the ring file. */
	char bell[600];
	snprintf(bell, sizeof(bell), "%s.bell", path);
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	ctx->bell_fd = -1;
	if (strlen(bell) < sizeof(addr.sun_path)) {
		strcpy(addr.sun_path, bell);
		int b = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (b >= 0 && connect(b, (struct sockaddr *)&addr, sizeof(addr)) == 0)
			ctx->bell_fd = b;
		else if (b >= 0)
			close(b);
	}
	return 0;
}

static void ring_node(struct pw_context *ctx)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int32_t one = 1;
	if (__atomic_load_n(ring_word(ctx, NODE_ASLEEP), __ATOMIC_SEQ_CST) == 1
	    && __atomic_compare_exchange_n(ring_word(ctx, NODE_ASLEEP), &one, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		char b = 1;
		if (ctx->bell_fd < 0 || send(ctx->bell_fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			Pagewire__Verbs__V1__SessionRequest req = PAGEWIRE__VERBS__V1__SESSION_REQUEST__INIT;
			Pagewire__Verbs__V1__Doorbell bell = PAGEWIRE__VERBS__V1__DOORBELL__INIT;
			req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_DOORBELL;
			req.doorbell = &bell;
			pw_session_send(&ctx->session, &req);
		}
	}
}

static struct ibv_context_ops context_ops;
static int pw_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr, size_t attr_len);
static int pw_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size);
static int pw_modify_qp_rate_limit(struct ibv_qp *ibqp, struct ibv_qp_rate_limit_attr *attr);
static int pw_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list,
			uint32_t num_sges);

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct pw_device *dev = (struct pw_device *)device;
	struct pw_context *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->dev = dev;
	ctx->memory_fd = -1;
	ctx->bell_fd = -1;
	ctx->control.fd = ctx->session.fd = ctx->pager_conn.fd = -1;
	pthread_mutex_init(&ctx->post_lock, NULL);
	pthread_mutex_init(&ctx->event_lock, NULL);
	pthread_mutex_init(&ctx->qp_lock, NULL);
	pthread_mutexattr_t recursive;
	pthread_mutexattr_init(&recursive);
	pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&ctx->mr_lock, &recursive);
	pthread_mutex_init(&ctx->fault_lock, &recursive);
	pthread_mutex_init(&ctx->extent_lock, NULL);
	int e = pw_conn_open(&ctx->control, dev->socket_path);
	if (!e)
		e = pw_conn_open(&ctx->session, dev->socket_path);
	if (!e)
		e = pw_session_open(&ctx->session);
	if (!e) {
		Pagewire__Verbs__V1__SessionRequest req = PAGEWIRE__VERBS__V1__SESSION_REQUEST__INIT;
		Pagewire__Verbs__V1__OpenSession open_session = PAGEWIRE__VERBS__V1__OPEN_SESSION__INIT;
		char name[64];
		snprintf(name, sizeof(name), "verbs-%d", (int)getpid());
		open_session.name = name;
		req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_OPEN;
		req.open = &open_session;
		e = pw_session_send(&ctx->session, &req);
	}
	if (!e) {
		Pagewire__Verbs__V1__SessionEvent *ev = expect(ctx, PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_OPENED);
		if (!ev) {
			e = ECONNREFUSED;
		} else {
			ctx->endpoint_id = ev->opened->endpoint_id;
			ctx->session_key = ev->opened->session_key;
			ctx->page_size = ev->opened->page_size;
			snprintf(ctx->node_id, sizeof(ctx->node_id), "%s", ev->opened->node_id);
			protobuf_c_message_free_unpacked(&ev->base, NULL);
		}
	}
	if (!e) {
		Pagewire__Verbs__V1__DescribeNodeRequest req = PAGEWIRE__VERBS__V1__DESCRIBE_NODE_REQUEST__INIT;
		e = pw_call(&ctx->control, "DescribeNode", &req.base, &pagewire__verbs__v1__describe_node_response__descriptor,
			    (ProtobufCMessage **)&ctx->node);
		if (!e) {
			ctx->lid = ctx->node->lid;
			ctx->mtu = ctx->node->mtu;
			ctx->initial_credits = ctx->node->initial_credits;
		}
	}
	if (!e)
		e = attach_rings(ctx);
	if (!e && pipe2(ctx->async_pipe, O_CLOEXEC) < 0)
		e = errno;
	if (e) {
		pw_log(PW_ERROR, "cannot open %s on node %s: %s", device->name, dev->target, strerror(e));
		pw_conn_close(&ctx->session);
		pw_conn_close(&ctx->control);
		if (ctx->node)
			protobuf_c_message_free_unpacked(&ctx->node->base, NULL);
		free(ctx);
		errno = e;
		return NULL;
	}
	struct ibv_context *c = &ctx->vctx.context;
	c->device = device;
	c->ops = context_ops;
	c->cmd_fd = ctx->session.fd;
	c->async_fd = ctx->async_pipe[0];
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.query_port = pw_query_port;
	ctx->vctx.query_device_ex = pw_query_device_ex;
	ctx->vctx.advise_mr = pw_advise_mr;
	ctx->vctx.modify_qp_rate_limit = pw_modify_qp_rate_limit;
	if (pw_pager_attach(ctx) != 0)
		pw_log(PW_WARN, "%s: pages the node takes back cannot be brought in again; registered memory stays as it is", device->name);
	if (pthread_create(&ctx->reader, NULL, reader_main, ctx) == 0)
		ctx->reader_started = 1;
	pw_log(PW_INFO, "%s: session %u on node %s (LID %u) through %s", device->name, ctx->endpoint_id, ctx->node_id, ctx->lid,
	       dev->socket_path);
	return c;
}

EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct pw_context *ctx = pw_ctx(context);
	pw_memory_close(ctx); /* registered pages back to the program first, while the node still serves faults */
	pw_pager_detach(ctx);
	ctx->closing = 1;
	shutdown(ctx->session.fd, SHUT_RDWR); /* the node ends the session: queue pairs, pins and memory go */
	if (ctx->reader_started)
		pthread_join(ctx->reader, NULL);
	pw_conn_close(&ctx->session);
	pw_conn_close(&ctx->control);
	if (ctx->bell_fd >= 0)
		close(ctx->bell_fd);
	if (ctx->rings_base)
		munmap(ctx->rings_base, ctx->rings_bytes);
	close(ctx->async_pipe[0]);
	close(ctx->async_pipe[1]);
	if (ctx->node)
		protobuf_c_message_free_unpacked(&ctx->node->base, NULL);
	free(ctx->qps);
	free(ctx->mrs);
	free(ctx);
	return 0;
}

/* ---- queries ------------------------------------------------------------------------------------ */

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096) return IBV_MTU_4096;
	if (bytes >= 2048) return IBV_MTU_2048;
	if (bytes >= 1024) return IBV_MTU_1024;
	if (bytes >= 512) return IBV_MTU_512;
	return IBV_MTU_256;
}

static void device_attr(struct pw_context *ctx, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "pagewire-0.1");
	a->node_guid = htobe64(0x0250570000000000ull | ctx->lid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ull << 46;
	a->page_size_cap = ctx->page_size;
	a->vendor_id = 0x5057;
	a->vendor_part_id = 1;
	a->hw_ver = 1;
	a->max_qp = 1 << 16;
	a->max_qp_wr = 1 << 14;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_PORT_ACTIVE_EVENT;
	a->max_sge = MAX_SGE;
	a->max_sge_rd = MAX_SGE;
	a->max_cq = 1 << 16;
	a->max_cqe = 1 << 22;
	a->max_mr = 1 << 20;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 1 << 16;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = 1 << 16;
	a->max_srq_wr = 1 << 14;
	a->max_srq_sge = 1;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	device_attr(pw_ctx(context), attr);
	return 0;
}

static int pw_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	(void)input;
	struct ibv_device_attr_ex full;
	memset(&full, 0, sizeof(full));
	device_attr(pw_ctx(context), &full.orig_attr);
	/* ON_DEMAND: NIC page faults on every RC operation, and implicit (whole address space) registrations. */
	full.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ
		      | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	full.odp_caps.per_transport_caps.rc_odp_caps = rc;
	full.xrc_odp_caps = 0;
	full.max_dm_size = 0;
	full.completion_timestamp_mask = 0;
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	return 0;
}

static int pw_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr, size_t attr_len)
{
	struct pw_context *ctx = pw_ctx(context);
	if (port_num != 1)
		return EINVAL;
	struct ibv_port_attr a;
	memset(&a, 0, sizeof(a));
	a.state = ctx->port_down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = mtu_enum(ctx->mtu);
	a.gid_tbl_len = 1;
	a.port_cap_flags = 0;
	a.max_msg_sz = 1u << 31;
	a.pkey_tbl_len = 1;
	a.lid = (uint16_t)ctx->lid;
	a.sm_lid = (uint16_t)ctx->lid;
	a.lmc = 0;
	a.max_vl_num = 1;
	a.sm_sl = 0;
	a.subnet_timeout = 18;
	a.init_type_reply = 0;
	a.active_width = 2;  /* 4X */
	a.active_speed = 32; /* EDR-like; the link is whatever gRPC moves */
	a.phys_state = ctx->port_down ? 3 : 5; /* Disabled, or LinkUp */
	a.link_layer = IBV_LINK_LAYER_INFINIBAND;
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return pw_query_port(context, port_num, (struct ibv_port_attr *)port_attr, sizeof(struct ibv_port_attr));
}

static void gid_of(struct pw_context *ctx, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[0] = 0xfe;
	gid->raw[1] = 0x80;
	uint64_t guid = 0x0250570000000000ull | ctx->lid;
	uint64_t be = htobe64(guid);
	memcpy(gid->raw + 8, &be, 8);
}

EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	if (port_num != 1 || index != 0)
		return -1;
	gid_of(pw_ctx(context), gid);
	return 0;
}

EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index, struct ibv_gid_entry *entry,
			     uint32_t flags, size_t entry_size)
{
	(void)flags;
	if (port_num != 1 || gid_index != 0)
		return EINVAL;
	struct ibv_gid_entry e;
	memset(&e, 0, sizeof(e));
	gid_of(pw_ctx(context), &e.gid);
	e.gid_index = 0;
	e.port_num = 1;
	e.gid_type = IBV_GID_TYPE_IB;
	memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
	return 0;
}

/* libibverbs' private ibv_query_gid_type, which ibv_devinfo calls: every GID here is an InfiniBand one (sysfs type 0). */
EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries, size_t max_entries, uint32_t flags,
				    size_t entry_size)
{
	if (flags)
		return -EINVAL;
	if (max_entries < 1)
		return -EINVAL; /* the port's one GID does not fit */
	int e = _ibv_query_gid_ex(context, 1, 0, entries, 0, entry_size);
	return e ? -e : 1;
}

EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type)
{
	(void)context;
	if (port_num != 1 || index != 0)
		return EINVAL;
	*type = 0;
	return 0;
}

EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	(void)context;
	if (port_num != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	(void)context;
	return port_num == 1 && pkey == htobe16(0xffff) ? 0 : -1;
}

/* ---- protection domains and memory ------------------------------------------------------------------ */

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	static uint32_t handles;
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = context;
	pd->handle = __atomic_add_fetch(&handles, 1, __ATOMIC_RELAXED);
	return pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return pw_reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return pw_reg_mr(pd, addr, length, iova, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return pw_reg_mr(pd, addr, length, iova, access);
}

EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return pw_rereg_mr(mr, flags, pd, addr, length, access);
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return pw_dereg_mr(mr);
}

static int pw_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list,
			uint32_t num_sges)
{
	struct pw_context *ctx = pw_ctx(pd->context);
	(void)flags; /* IBV_ADVISE_MR_FLAG_FLUSH: every prefetch here finishes before the call returns */
	Pagewire__Verbs__V1__AdviseRequest__Advice a;
	switch (advice) {
	case IBV_ADVISE_MR_ADVICE_PREFETCH: a = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__ADVICE__PREFETCH; break;
	case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE: a = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__ADVICE__PREFETCH_WRITE; break;
	case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: a = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__ADVICE__PREFETCH_NO_FAULT; break;
	default: return EOPNOTSUPP;
	}
	for (uint32_t i = 0; i < num_sges; i++) {
		Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
		Pagewire__Verbs__V1__AdviseRequest req = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__INIT;
		req.endpoint = &ref;
		req.lkey = sg_list[i].lkey;
		req.address = sg_list[i].addr;
		req.length = sg_list[i].length;
		req.advice = a;
		int e = pw_memory_ensure(ctx, sg_list[i].lkey, sg_list[i].addr, sg_list[i].length);
		if (!e)
			e = pw_call_void(&ctx->control, "Advise", &req.base, &pagewire__verbs__v1__advise_response__descriptor);
		if (e)
			return e;
	}
	return 0;
}

/* ---- completion queues and channels --------------------------------------------------------------- */

EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct pw_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];
	if (!ch || pipe2(fds, O_CLOEXEC) < 0) {
		free(ch);
		errno = ENOMEM;
		return NULL;
	}
	ch->channel.context = context;
	ch->channel.fd = fds[0];
	ch->channel.refcnt = 0;
	ch->write_fd = fds[1];
	return &ch->channel;
}

EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct pw_channel *ch = (struct pw_channel *)channel;
	if (channel->refcnt)
		return EBUSY;
	close(ch->channel.fd);
	close(ch->write_fd);
	free(ch);
	return 0;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
				    int comp_vector)
{
	(void)comp_vector;
	if (cqe < 1 || cqe > (1 << 22)) {
		errno = EINVAL;
		return NULL;
	}
	struct pw_cq *cq = calloc(1, sizeof(*cq));
	if (cq)
		cq->queue.entries = calloc((size_t)cqe, sizeof(struct ibv_wc));
	if (!cq || !cq->queue.entries) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->queue.capacity = cqe;
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	if (channel)
		__atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
	return &cq->cq;
}

/* ibv_resize_cq: to at least as many entries as the CQ holds now, as Soft-RoCE requires. */
EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (cqe < 1 || cqe > (1 << 22))
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	struct pw_wc_queue *q = &cq->queue;
	if (cqe < q->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	struct ibv_wc *entries = calloc((size_t)cqe, sizeof(*entries));
	if (!entries) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (int i = 0; i < q->count; i++)
		entries[i] = q->entries[(q->head + i) % q->capacity];
	free(q->entries);
	q->entries = entries;
	q->capacity = cqe;
	q->head = 0;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (cq->armed)
		__atomic_sub_fetch(&armed_cqs, 1, __ATOMIC_RELAXED);
	if (ibcq->channel)
		__atomic_sub_fetch(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
	free(cq->queue.entries);
	free(cq);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/*
 * An empty poll. The NIC is the node's threads, on the same cores as the program: a program that polls
 * without end would hold a core the NIC needs (on two cores, until the next scheduler tick, ~4 ms). So
 * after polling in vain for a while (PAGEWIRE_VERBS_SPIN_US, 20 us by default) each empty poll yields,
 * as the SDK's busy waits do.
 */
static void idle_poll(struct pw_cq *cq)
{
	static int64_t spin_ns = -1;
	if (spin_ns < 0) {
		const char *s = getenv("PAGEWIRE_VERBS_SPIN_US");
		spin_ns = (s && *s ? atoll(s) : 20) * 1000;
	}
	uint64_t now = now_ns();
	if (cq->empty_since_ns == 0)
		cq->empty_since_ns = now;
	else if ((int64_t)(now - cq->empty_since_ns) >= spin_ns)
		sched_yield();
}

static int pw_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	struct pw_context *ctx = pw_ctx(ibcq->context);
	if (cq->queue.count < num_entries)
		drain(ctx);
	pthread_mutex_lock(&cq->lock);
	int n = 0;
	struct pw_wc_queue *q = &cq->queue;
	while (n < num_entries && q->count > 0) {
		wc[n++] = q->entries[q->head];
		q->head = (q->head + 1) % q->capacity;
		q->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	if (n == 0)
		idle_poll(cq);
	else
		cq->empty_since_ns = 0;
	return n;
}

/* Arms the CQ for its next completion, or (solicited_only) its next solicited receive or error; NEXT wins over SOLICITED. */
static int pw_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	pthread_mutex_lock(&cq->lock);
	if (!cq->armed)
		__atomic_add_fetch(&armed_cqs, 1, __ATOMIC_RELAXED);
	if (cq->armed != ARMED_NEXT)
		cq->armed = solicited_only ? ARMED_SOLICITED : ARMED_NEXT;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct ibv_cq *which;
	for (;;) {
		ssize_t n = read(channel->fd, &which, sizeof(which));
		if (n == sizeof(which))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		return -1;
	}
	__atomic_sub_fetch(&armed_cqs, 1, __ATOMIC_RELAXED);
	*cq = which;
	*cq_context = which->cq_context;
	return 0;
}

EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- shared receive queues ------------------------------------------------------------------------- */

static pthread_mutex_t srq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pw_srq *srqs[256];

struct ibv_srq *pw_srq_of(struct pw_context *ctx, uint32_t id)
{
	struct ibv_srq *found = NULL;
	pthread_mutex_lock(&srq_lock);
	for (int i = 0; i < 256; i++)
		if (srqs[i] && srqs[i]->srq_id == id && pw_ctx(srqs[i]->srq.context) == ctx)
			found = &srqs[i]->srq;
	pthread_mutex_unlock(&srq_lock);
	return found;
}

static int post_receives(struct pw_context *ctx, uint32_t qpn, uint32_t srq_id, uint32_t max_sge, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad);

static int pw_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	return post_receives(pw_ctx(ibsrq->context), 0, srq->srq_id, srq->max_sge, wr, bad);
}

static int arm_srq(struct pw_context *ctx, struct pw_srq *srq, uint32_t limit)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__ArmSharedReceiveQueueRequest req = PAGEWIRE__VERBS__V1__ARM_SHARED_RECEIVE_QUEUE_REQUEST__INIT;
	req.endpoint = &ref;
	req.srq_id = srq->srq_id;
	req.limit = limit;
	int e = pw_call_void(&ctx->control, "ArmSharedReceiveQueue", &req.base, &pagewire__verbs__v1__arm_shared_receive_queue_response__descriptor);
	if (!e)
		srq->limit = limit;
	return e;
}

EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct pw_context *ctx = pw_ctx(pd->context);
	if (attr->attr.max_sge > MAX_SGE || attr->attr.max_wr > (1u << 14) || attr->attr.max_wr == 0) {
		errno = EINVAL;
		return NULL;
	}
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__CreateSharedReceiveQueueRequest req = PAGEWIRE__VERBS__V1__CREATE_SHARED_RECEIVE_QUEUE_REQUEST__INIT;
	req.endpoint = &ref;
	Pagewire__Verbs__V1__CreateSharedReceiveQueueResponse *reply = NULL;
	int e = pw_call(&ctx->control, "CreateSharedReceiveQueue", &req.base,
			&pagewire__verbs__v1__create_shared_receive_queue_response__descriptor, (ProtobufCMessage **)&reply);
	if (e) {
		errno = e;
		return NULL;
	}
	struct pw_srq *srq = calloc(1, sizeof(*srq));
	srq->srq.context = pd->context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = reply->srq_id;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	srq->srq_id = reply->srq_id;
	srq->max_wr = attr->attr.max_wr;
	srq->max_sge = attr->attr.max_sge ? attr->attr.max_sge : 1;
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	pthread_mutex_lock(&srq_lock);
	for (int i = 0; i < 256; i++)
		if (!srqs[i]) {
			srqs[i] = srq;
			break;
		}
	pthread_mutex_unlock(&srq_lock);
	if (attr->attr.srq_limit)
		arm_srq(ctx, srq, attr->attr.srq_limit);
	return &srq->srq;
}

EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	if (mask & IBV_SRQ_LIMIT)
		return arm_srq(pw_ctx(ibsrq->context), srq, attr->srq_limit);
	if (mask & IBV_SRQ_MAX_WR)
		srq->max_wr = attr->max_wr;
	return 0;
}

EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	return 0;
}

EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	struct pw_context *ctx = pw_ctx(ibsrq->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__DestroySharedReceiveQueueRequest req = PAGEWIRE__VERBS__V1__DESTROY_SHARED_RECEIVE_QUEUE_REQUEST__INIT;
	req.endpoint = &ref;
	req.srq_id = srq->srq_id;
	int e = pw_call_void(&ctx->control, "DestroySharedReceiveQueue", &req.base, &pagewire__verbs__v1__destroy_shared_receive_queue_response__descriptor);
	if (e)
		return e;
	pthread_mutex_lock(&srq_lock);
	for (int i = 0; i < 256; i++)
		if (srqs[i] == srq)
			srqs[i] = NULL;
	pthread_mutex_unlock(&srq_lock);
	free(srq);
	return 0;
}

/* ---- queue pairs ----------------------------------------------------------------------------------- */

static int add_qp(struct pw_context *ctx, struct pw_qp *qp)
{
	pthread_mutex_lock(&ctx->qp_lock);
	for (int i = 0; i < ctx->qp_slots; i++) {
		if (!ctx->qps[i]) {
			ctx->qps[i] = qp;
			pthread_mutex_unlock(&ctx->qp_lock);
			return 0;
		}
	}
	int slots = ctx->qp_slots ? ctx->qp_slots * 2 : 16;
	struct pw_qp **grown = realloc(ctx->qps, sizeof(*grown) * (size_t)slots);
	if (!grown) {
		pthread_mutex_unlock(&ctx->qp_lock);
		return ENOMEM;
	}
	memset(grown + ctx->qp_slots, 0, sizeof(*grown) * (size_t)(slots - ctx->qp_slots));
	grown[ctx->qp_slots] = qp;
	ctx->qps = grown;
	ctx->qp_slots = slots;
	pthread_mutex_unlock(&ctx->qp_lock);
	return 0;
}

static void remove_qp(struct pw_context *ctx, struct pw_qp *qp)
{
	pthread_mutex_lock(&ctx->qp_lock);
	for (int i = 0; i < ctx->qp_slots; i++)
		if (ctx->qps[i] == qp)
			ctx->qps[i] = NULL;
	pthread_mutex_unlock(&ctx->qp_lock);
}

static int destroy_on_node(struct pw_context *ctx, uint32_t qpn);

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct pw_context *ctx = pw_ctx(pd->context);
	if (attr->qp_type != IBV_QPT_RC) {
		pw_log(PW_WARN, "ibv_create_qp: only RC queue pairs are supported (asked for type %d)", attr->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cap.max_send_sge > MAX_SGE || attr->cap.max_recv_sge > MAX_SGE || attr->cap.max_inline_data > MAX_INLINE
	    || attr->cap.max_send_wr > (1u << 14) || attr->cap.max_recv_wr > (1u << 14)) {
		errno = EINVAL;
		return NULL;
	}
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__CreateQueuePairRequest req = PAGEWIRE__VERBS__V1__CREATE_QUEUE_PAIR_REQUEST__INIT;
	req.endpoint = &ref;
	if (attr->srq)
		req.srq_id = ((struct pw_srq *)attr->srq)->srq_id;
	Pagewire__Verbs__V1__CreateQueuePairResponse *reply = NULL;
	int e = pw_call(&ctx->control, "CreateQueuePair", &req.base, &pagewire__verbs__v1__create_queue_pair_response__descriptor,
			(ProtobufCMessage **)&reply);
	if (e) {
		errno = e;
		return NULL;
	}
	struct pw_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		destroy_on_node(ctx, reply->address->qpn);
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		errno = ENOMEM;
		return NULL;
	}
	qp->qp.context = pd->context;
	qp->qp.qp_context = attr->qp_context;
	qp->qp.pd = pd;
	qp->qp.send_cq = attr->send_cq;
	qp->qp.recv_cq = attr->recv_cq;
	qp->qp.srq = attr->srq;
	qp->qp.qp_num = reply->address->qpn;
	qp->qp.handle = qp->qp.qp_num;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	qp->cap = attr->cap;
	if (qp->cap.max_send_wr == 0)
		qp->cap.max_send_wr = 1;
	if (qp->cap.max_inline_data < 64)
		qp->cap.max_inline_data = attr->cap.max_inline_data ? attr->cap.max_inline_data : 64;
	attr->cap.max_inline_data = qp->cap.max_inline_data;
	qp->sq_sig_all = attr->sq_sig_all;
	pthread_mutex_init(&qp->modify_lock, NULL);
	/* Inline data goes through a registered staging area, one slot per send queue entry (as a WQE holds it). */
	size_t inline_bytes = ((size_t)qp->cap.max_send_wr * qp->cap.max_inline_data + ctx->page_size - 1) & ~((size_t)ctx->page_size - 1);
	qp->inline_buf = mmap(NULL, inline_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (qp->inline_buf != MAP_FAILED)
		qp->inline_mr = pw_reg_mr(pd, qp->inline_buf, inline_bytes, (uintptr_t)qp->inline_buf, IBV_ACCESS_LOCAL_WRITE);
	e = qp->inline_buf == MAP_FAILED || !qp->inline_mr ? (errno ? errno : ENOMEM) : add_qp(ctx, qp);
	if (e) {
		/* Nothing is left behind: the node's pair, the staging area and its registration go again. */
		pw_log(PW_ERROR, "ibv_create_qp: cannot set up queue pair %u: %s", qp->qp.qp_num, strerror(e));
		destroy_on_node(ctx, qp->qp.qp_num);
		if (qp->inline_mr)
			pw_dereg_mr(qp->inline_mr);
		if (qp->inline_buf != MAP_FAILED)
			munmap(qp->inline_buf, inline_bytes);
		pthread_mutex_destroy(&qp->modify_lock);
		free(qp);
		errno = e;
		return NULL;
	}
	return &qp->qp;
}

static int destroy_on_node(struct pw_context *ctx, uint32_t qpn)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__DestroyQueuePairRequest req = PAGEWIRE__VERBS__V1__DESTROY_QUEUE_PAIR_REQUEST__INIT;
	req.endpoint = &ref;
	req.qpn = qpn;
	return pw_call_void(&ctx->control, "DestroyQueuePair", &req.base, &pagewire__verbs__v1__destroy_queue_pair_response__descriptor);
}

EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	struct pw_context *ctx = pw_ctx(ibqp->context);
	int e = destroy_on_node(ctx, ibqp->qp_num);
	if (e && e != ENOENT)
		return e;
	drain(ctx);
	remove_qp(ctx, qp);
	if (qp->inline_mr) {
		size_t n = qp->inline_mr->length;
		pw_dereg_mr(qp->inline_mr);
		munmap(qp->inline_buf, n);
	}
	pthread_mutex_destroy(&qp->modify_lock);
	free(qp);
	return 0;
}

static const char *peer_of_lid(struct pw_context *ctx, uint32_t lid)
{
	if (lid == ctx->lid)
		return ctx->node_id;
	for (size_t i = 0; i < ctx->node->n_peer_lids; i++)
		if (ctx->node->peer_lids[i]->value == lid)
			return ctx->node->peer_lids[i]->key;
	return NULL;
}

/*
 * ibv_modify_qp_rate_limit: the node paces the pair (rate_limit in kbps, as the verb takes it; 0 removes
 * the limit), with max_burst_sz bytes back to back (0: the node's burst).
 */
static int pw_modify_qp_rate_limit(struct ibv_qp *ibqp, struct ibv_qp_rate_limit_attr *attr)
{
	struct pw_context *ctx = pw_ctx(ibqp->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__SetQueuePairRateLimitRequest req = PAGEWIRE__VERBS__V1__SET_QUEUE_PAIR_RATE_LIMIT_REQUEST__INIT;
	req.endpoint = &ref;
	req.qpn = ibqp->qp_num;
	req.bytes_per_second = (uint64_t)attr->rate_limit * 1000 / 8;
	req.burst_bytes = attr->max_burst_sz;
	return pw_call_void(&ctx->control, "SetQueuePairRateLimit", &req.base, &pagewire__verbs__v1__set_queue_pair_rate_limit_response__descriptor);
}

/*
 * Which attributes an RC queue pair's transition requires and allows, as the kernel's ib_modify_qp_is_ok
 * table has them (what Soft-RoCE enforces): a transition not listed, a required attribute missing or an
 * attribute the transition does not take is EINVAL.
 */
struct transition {
	enum ibv_qp_state from, to;
	int required, optional;
};

#define PATH_OPTIONAL (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER)
static const struct transition transitions[] = {
	{IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
	{IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
	{IBV_QPS_INIT, IBV_QPS_RTR,
	 IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
	 IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
	{IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT,
	 IBV_QP_CUR_STATE | PATH_OPTIONAL | IBV_QP_RATE_LIMIT},
	{IBV_QPS_RTS, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | PATH_OPTIONAL | IBV_QP_RATE_LIMIT},
	{IBV_QPS_SQD, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | PATH_OPTIONAL},
	{IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
	{IBV_QPS_SQD, IBV_QPS_SQD, 0,
	 IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE
		 | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PORT},
};

static int transition_ok(enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
	int attrs = mask & ~IBV_QP_STATE;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return (attrs & ~IBV_QP_CUR_STATE) == 0; /* from any state, taking nothing else */
	for (size_t i = 0; i < sizeof(transitions) / sizeof(transitions[0]); i++)
		if (transitions[i].from == from && transitions[i].to == to)
			return (attrs & transitions[i].required) == transitions[i].required
			       && (attrs & ~(transitions[i].required | transitions[i].optional)) == 0;
	return 0;
}

/* InfiniBand's 5-bit RNR timer: the delay an RNR NAK asks for, in nanoseconds (0 is the longest, 655.36 ms). */
static uint64_t rnr_timer_ns(uint8_t t)
{
	static const uint32_t us[32] = {655360, 10,    20,    30,    40,    60,    80,    120,   160,    240,    320,
					480,    640,   960,   1280,  1920,  2560,  3840,  5120,  7680,   10240,  15360,
					20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
	return (uint64_t)us[t & 31] * 1000;
}

#define ATTRIBUTE(name) PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__ATTRIBUTE__##name

/* Moves the node's queue pair to the request's state, with the attributes it names. */
static int modify_on_node(struct pw_context *ctx, uint32_t qpn, Pagewire__Verbs__V1__ModifyQueuePairRequest *req)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	req->endpoint = &ref;
	req->qpn = qpn;
	return pw_call_void(&ctx->control, "ModifyQueuePair", &req->base, &pagewire__verbs__v1__modify_queue_pair_response__descriptor);
}

EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	struct pw_context *ctx = pw_ctx(ibqp->context);
	pthread_mutex_lock(&qp->modify_lock);
	enum ibv_qp_state from = ibqp->state;
	enum ibv_qp_state to = (mask & IBV_QP_STATE) ? attr->qp_state : from;
	int e = 0;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != from) {
		pw_log(PW_DEBUG, "ibv_modify_qp: queue pair %u is in state %d, not %d as cur_qp_state says", ibqp->qp_num, from,
		       attr->cur_qp_state);
		e = EINVAL;
	} else if (!transition_ok(from, to, mask)) {
		pw_log(PW_WARN, "ibv_modify_qp: queue pair %u cannot go from state %d to %d with attribute mask 0x%x", ibqp->qp_num, from,
		       to, mask);
		e = EINVAL;
	} else if ((mask & IBV_QP_PORT) && attr->port_num != 1) {
		e = EINVAL;
	} else if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096)) {
		e = EINVAL;
	} else if ((mask & IBV_QP_RETRY_CNT && attr->retry_cnt > 7) || (mask & IBV_QP_RNR_RETRY && attr->rnr_retry > 7)
		   || (mask & IBV_QP_TIMEOUT && attr->timeout > 31) || (mask & IBV_QP_MIN_RNR_TIMER && attr->min_rnr_timer > 31)) {
		e = EINVAL;
	}
	Pagewire__Verbs__V1__ModifyQueuePairRequest req = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__INIT;
	Pagewire__Verbs__V1__QpAddress address = PAGEWIRE__VERBS__V1__QP_ADDRESS__INIT;
	if (!e && to == IBV_QPS_RESET && from != IBV_QPS_RESET) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__RESET;
		e = modify_on_node(ctx, ibqp->qp_num, &req);
		if (!e) {
			/* A reset pair starts over: what query_qp reports too. */
			struct ibv_qp_attr fresh;
			memset(&fresh, 0, sizeof(fresh));
			qp->attr = fresh;
			qp->sqd_notify = 0;
		}
	} else if (!e && to == IBV_QPS_ERR && from != IBV_QPS_ERR) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__ERROR;
		e = modify_on_node(ctx, ibqp->qp_num, &req);
	} else if (!e && to == IBV_QPS_RTR) {
		const char *peer = peer_of_lid(ctx, attr->ah_attr.dlid);
		if (!peer) {
			pw_log(PW_WARN, "ibv_modify_qp: LID %u is neither node %s's (%u) nor any of its peers'", attr->ah_attr.dlid, ctx->node_id,
			       ctx->lid);
			e = EINVAL;
		} else {
			address.node_id = (char *)peer;
			address.qpn = attr->dest_qp_num;
			/* A verbs program exchanges LID, QPN and PSN only: credits and page size are the peer's configuration, the same as ours. */
			address.initial_credits = ctx->initial_credits;
			address.page_size = ctx->page_size;
			req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__READY_TO_RECEIVE;
			req.peer = &address;
			req.attributes = ATTRIBUTE(RECEIVE_PSN) | ATTRIBUTE(RNR_DELAY);
			req.receive_psn = attr->rq_psn & 0xffffff;
			req.rnr_delay_ns = rnr_timer_ns(attr->min_rnr_timer);
			e = modify_on_node(ctx, ibqp->qp_num, &req);
		}
	} else if (!e && to == IBV_QPS_RTS) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__READY_TO_SEND;
		if (mask & IBV_QP_SQ_PSN) {
			req.attributes |= ATTRIBUTE(SEND_PSN);
			req.send_psn = attr->sq_psn & 0xffffff;
		}
		if (mask & IBV_QP_TIMEOUT) {
			/* 4.096 us times 2^timeout; 0 waits forever. The node raises one shorter than its floor to it. */
			req.attributes |= ATTRIBUTE(ACK_TIMEOUT);
			req.ack_timeout_ns = attr->timeout == 0 ? 0 : 4096ull << attr->timeout;
		}
		if (mask & IBV_QP_RETRY_CNT) {
			req.attributes |= ATTRIBUTE(RETRY_COUNT);
			req.retry_count = attr->retry_cnt;
		}
		if (mask & IBV_QP_RNR_RETRY) {
			req.attributes |= ATTRIBUTE(RNR_RETRY_COUNT);
			req.rnr_retry_count = attr->rnr_retry;
		}
		if (mask & IBV_QP_MIN_RNR_TIMER) {
			req.attributes |= ATTRIBUTE(RNR_DELAY);
			req.rnr_delay_ns = rnr_timer_ns(attr->min_rnr_timer);
		}
		e = modify_on_node(ctx, ibqp->qp_num, &req);
	} else if (!e && to == IBV_QPS_SQD && from == IBV_QPS_RTS) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__SEND_QUEUE_DRAINED;
		/* Set first: a drain with nothing under way is over before the call returns, and its event with it. */
		qp->sqd_notify = (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify;
		e = modify_on_node(ctx, ibqp->qp_num, &req);
		if (e)
			qp->sqd_notify = 0;
	}
	if (!e && (mask & IBV_QP_RATE_LIMIT))
		e = pw_modify_qp_rate_limit(ibqp, &(struct ibv_qp_rate_limit_attr){.rate_limit = attr->rate_limit});
	if (e) {
		pthread_mutex_unlock(&qp->modify_lock);
		return e;
	}
	if (mask & IBV_QP_AV)
		qp->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = attr->rq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = attr->en_sqd_async_notify;
	if (mask & IBV_QP_RATE_LIMIT)
		qp->attr.rate_limit = attr->rate_limit;
	ibqp->state = to;
	qp->attr.qp_state = to;
	pthread_mutex_unlock(&qp->modify_lock);
	return 0;
}

EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init_attr)
{
	(void)mask;
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	*attr = qp->attr;
	attr->qp_state = ibqp->state;
	attr->cur_qp_state = ibqp->state;
	attr->cap = qp->cap;
	if (init_attr) {
		memset(init_attr, 0, sizeof(*init_attr));
		init_attr->qp_context = ibqp->qp_context;
		init_attr->send_cq = ibqp->send_cq;
		init_attr->recv_cq = ibqp->recv_cq;
		init_attr->srq = ibqp->srq;
		init_attr->cap = qp->cap;
		init_attr->qp_type = IBV_QPT_RC;
		init_attr->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	return NULL; /* the extended send API (ibv_wr_*) is not supported: programs use ibv_post_send */
}

/* ---- posting ------------------------------------------------------------------------------------- */

/* Puts a record on the request ring, waiting (up to a second) for room; then wakes the node if it sleeps. */
static int put_record(struct pw_context *ctx, int32_t type, const uint8_t *record, int32_t length)
{
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int spins = 0;; spins++) {
		int32_t index;
		uint8_t *at = pw_ring_claim(&ctx->requests, type, length, &index);
		if (at) {
			memcpy(at, record, (size_t)length);
			pw_ring_commit(&ctx->requests, index, length);
			ring_node(ctx);
			return 0;
		}
		if (length > ctx->requests.max_message)
			return EINVAL;
		ring_node(ctx);
		sched_yield();
		if ((spins & 1023) == 1023) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec > 1)
				return ENOMEM;
		}
	}
}

/* A POST record (ring's PostRecord) of `count` work requests already written after its header. */
static int put_posts(struct pw_context *ctx, uint8_t *record, uint32_t qpn, int count)
{
	uint32_t n = (uint32_t)count;
	memcpy(record, &qpn, 4);
	memcpy(record + 4, &n, 4);
	return put_record(ctx, REQ_POST, record, POST_HEADER + count * POST_WR);
}

/* A POST_RECEIVE record (ring's PostReceiveRecord) of `count` receives already written after its header. */
static int put_receives(struct pw_context *ctx, uint8_t *record, uint32_t qpn, uint32_t srq_id, int count)
{
	uint32_t n = (uint32_t)count, zero = 0;
	memcpy(record, &qpn, 4);
	memcpy(record + 4, &srq_id, 4);
	memcpy(record + 8, &n, 4);
	memcpy(record + 12, &zero, 4);
	return put_record(ctx, REQ_POST_RECEIVE, record, RECV_HEADER + count * RECV_WR);
}

static int wire_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: return OP_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM: return OP_WRITE_WITH_IMM;
	case IBV_WR_SEND: return OP_SEND;
	case IBV_WR_SEND_WITH_IMM: return OP_SEND_WITH_IMM;
	case IBV_WR_RDMA_READ: return OP_READ;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return OP_FETCH_ADD;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return OP_COMPARE_SWAP;
	default: return 0;
	}
}

static void put_wr(uint8_t *w, uint64_t wr_id, int opcode, int flags, uint32_t lkey, uint64_t local, uint32_t length,
		   uint64_t remote, uint64_t rkey, uint64_t add, uint32_t imm, uint64_t swap)
{
	memset(w, 0, POST_WR);
	int32_t op = (opcode & 0xFFFF) | flags;
	memcpy(w, &wr_id, 8);
	memcpy(w + 8, &op, 4);
	memcpy(w + 12, &lkey, 4);
	memcpy(w + 16, &local, 8);
	memcpy(w + 24, &length, 4);
	memcpy(w + 32, &remote, 8);
	memcpy(w + 40, &rkey, 8);
	memcpy(w + 48, &add, 8);
	memcpy(w + 56, &imm, 4);
	memcpy(w + 64, &swap, 8);
}

/*
 * A POST_LIST or POST_RECEIVE_LIST record (ring's ScatterGatherRecord): one work request or receive, whose
 * `body` is already written, followed by its elements.
 */
static int put_list(struct pw_context *ctx, int32_t type, uint32_t qpn, uint32_t srq_id, const uint8_t *body, int body_bytes,
		    const struct ibv_sge *sg, int n)
{
	uint8_t record[LIST_HEADER + POST_WR + MAX_SGE * LIST_ELEMENT];
	uint32_t count = (uint32_t)n, zero = 0;
	memcpy(record, &qpn, 4);
	memcpy(record + 4, &srq_id, 4);
	memcpy(record + 8, &count, 4);
	memcpy(record + 12, &zero, 4);
	memcpy(record + LIST_HEADER, body, (size_t)body_bytes);
	for (int i = 0; i < n; i++) {
		uint8_t *e = record + LIST_HEADER + body_bytes + i * LIST_ELEMENT;
		memcpy(e, &sg[i].lkey, 4);
		memcpy(e + 4, &sg[i].length, 4);
		memcpy(e + 8, &sg[i].addr, 8);
	}
	return put_record(ctx, type, record, LIST_HEADER + body_bytes + n * LIST_ELEMENT);
}

/*
 * Where a request's elements are: one range when they continue one another under one key (most
 * requests: they go in the fixed-size records), else a list. Under an implicit registration the pages
 * they name become the NIC's when first posted.
 */
static int local_range(struct pw_context *ctx, const struct ibv_sge *sg, int n, uint32_t *lkey, uint64_t *local, uint32_t *length,
		       int *listed)
{
	*lkey = 0;
	*local = 0;
	*length = 0;
	*listed = 0;
	uint64_t total = 0;
	for (int i = 0; i < n; i++) {
		total += sg[i].length;
		if (sg[i].length) {
			int e = pw_memory_ensure(ctx, sg[i].lkey, sg[i].addr, sg[i].length);
			if (e)
				return e;
		}
		if (i == 0) {
			*lkey = sg[0].lkey;
			*local = sg[0].addr;
		} else if (sg[i].lkey != *lkey || sg[i].addr != *local + *length) {
			*listed = 1;
		}
		*length += sg[i].length;
	}
	return total > UINT32_MAX ? EINVAL : 0;
}

static int pw_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	struct pw_context *ctx = pw_ctx(ibqp->context);
	uint8_t record[POST_HEADER + 32 * POST_WR];
	int count = 0;
	int e = 0;
	pthread_mutex_lock(&ctx->post_lock);
	for (; wr; wr = wr->next) {
		/* Before RTS a send is refused; in SQD it waits, in ERROR it completes as flushed (the node's to say). */
		if (ibqp->state < IBV_QPS_RTS) {
			pw_log(PW_DEBUG, "ibv_post_send: queue pair %u is not ready to send (state %d)", ibqp->qp_num, ibqp->state);
			e = EINVAL;
			break;
		}
		int opcode = wire_opcode(wr->opcode);
		if (!opcode || wr->num_sge < 0 || wr->num_sge > (int)qp->cap.max_send_sge) {
			e = EINVAL;
			break;
		}
		int atomic = opcode == OP_FETCH_ADD || opcode == OP_COMPARE_SWAP;
		int flags = (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED) ? 0 : FLAG_UNSIGNALED)
			    | (wr->send_flags & IBV_SEND_FENCE ? FLAG_FENCE : 0) | (wr->send_flags & IBV_SEND_SOLICITED ? FLAG_SOLICITED : 0);
		uint32_t lkey = 0;
		uint64_t local = 0;
		uint32_t length = 0;
		int listed = 0;
		if (wr->send_flags & IBV_SEND_INLINE) {
			size_t total = 0;
			for (int i = 0; i < wr->num_sge; i++)
				total += wr->sg_list[i].length;
			if (total > qp->cap.max_inline_data || opcode == OP_READ || atomic) {
				e = EINVAL;
				break;
			}
			uint8_t *slot = qp->inline_buf + (size_t)(qp->inline_next++ % qp->cap.max_send_wr) * qp->cap.max_inline_data;
			size_t at = 0;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(slot + at, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				at += wr->sg_list[i].length;
			}
			lkey = total ? qp->inline_mr->lkey : 0;
			local = total ? (uintptr_t)slot : 0;
			length = (uint32_t)total;
		} else {
			e = local_range(ctx, wr->sg_list, wr->num_sge, &lkey, &local, &length, &listed);
			if (e)
				break;
		}
		uint64_t remote = 0, rkey = 0, add = 0, swap = 0;
		if (atomic) {
			/* The fetched word lands in the request's own buffer (its one 8-byte element), written by the node. */
			remote = wr->wr.atomic.remote_addr;
			rkey = wr->wr.atomic.rkey;
			add = wr->wr.atomic.compare_add;
			swap = wr->wr.atomic.swap;
		} else if (opcode != OP_SEND && opcode != OP_SEND_WITH_IMM) {
			remote = wr->wr.rdma.remote_addr;
			rkey = wr->wr.rdma.rkey;
		}
		if (count == 32 || (listed && count > 0)) {
			/* a list record goes alone, after what came before it */
			e = put_posts(ctx, record, ibqp->qp_num, count);
			count = 0;
			if (e)
				break;
		}
		if (listed) {
			uint8_t body[POST_WR];
			put_wr(body, wr->wr_id, opcode, flags, 0, 0, 0, remote, rkey, add, wr->imm_data, swap);
			e = put_list(ctx, REQ_POST_LIST, ibqp->qp_num, 0, body, POST_WR, wr->sg_list, wr->num_sge);
			if (e)
				break;
			continue;
		}
		put_wr(record + POST_HEADER + count++ * POST_WR, wr->wr_id, opcode, flags, lkey, local, length, remote, rkey, add,
		       wr->imm_data, swap);
	}
	if (count > 0) {
		int e2 = put_posts(ctx, record, ibqp->qp_num, count);
		if (!e)
			e = e2;
	}
	pthread_mutex_unlock(&ctx->post_lock);
	if (e && bad)
		*bad = wr;
	return e;
}

static int post_receives(struct pw_context *ctx, uint32_t qpn, uint32_t srq_id, uint32_t max_sge, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad)
{
	uint8_t record[RECV_HEADER + 64 * RECV_WR];
	int count = 0;
	int e = 0;
	pthread_mutex_lock(&ctx->post_lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > (int)max_sge) {
			e = EINVAL;
			break;
		}
		uint32_t lkey, length;
		uint64_t address;
		int listed;
		e = local_range(ctx, wr->sg_list, wr->num_sge, &lkey, &address, &length, &listed);
		if (e)
			break;
		if (count == 64 || (listed && count > 0)) {
			e = put_receives(ctx, record, qpn, srq_id, count);
			count = 0;
			if (e)
				break;
		}
		uint8_t body[RECV_WR];
		uint8_t *r = listed ? body : record + RECV_HEADER + count * RECV_WR;
		uint32_t no_key = 0, no_length = 0;
		uint64_t no_address = 0;
		memcpy(r, &wr->wr_id, 8);
		memcpy(r + 8, listed ? &no_key : &lkey, 4);
		memcpy(r + 12, listed ? &no_length : &length, 4);
		memcpy(r + 16, listed ? &no_address : &address, 8);
		if (listed) {
			e = put_list(ctx, REQ_POST_RECEIVE_LIST, qpn, srq_id, body, RECV_WR, wr->sg_list, wr->num_sge);
			if (e)
				break;
		} else {
			count++;
		}
	}
	if (count > 0) {
		int e2 = put_receives(ctx, record, qpn, srq_id, count);
		if (!e)
			e = e2;
	}
	pthread_mutex_unlock(&ctx->post_lock);
	if (e && bad)
		*bad = wr;
	return e;
}

/* Receives may be posted from INIT on; in ERROR they complete as flushed (the node's to say), as the standard asks. */
static int pw_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (ibqp->srq || ibqp->state == IBV_QPS_RESET) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	return post_receives(pw_ctx(ibqp->context), ibqp->qp_num, 0, ((struct pw_qp *)ibqp)->cap.max_recv_sge, wr, bad);
}

/* ---- asynchronous events ----------------------------------------------------------------------- */

EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	for (;;) {
		ssize_t n = read(context->async_fd, event, sizeof(*event));
		if (n == sizeof(*event))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return -1;
	}
}

EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

/* ---- strings and helpers programs link against --------------------------------------------------- */

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "success", [IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error", [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error", [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error", [IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error", [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error", [IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded", [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error", [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error", [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state", [IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error", [IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error", [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof(names) / sizeof(names[0]) && names[status])
		return names[status];
	return "unknown";
}

EXPORT const char *ibv_port_state_str(enum ibv_port_state state)
{
	static const char *const names[] = { "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };
	return (unsigned)state < 6 ? names[state] : "unknown";
}

EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	switch (node_type) {
	case IBV_NODE_CA: return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH: return "InfiniBand switch";
	case IBV_NODE_ROUTER: return "InfiniBand router";
	case IBV_NODE_RNIC: return "iWARP NIC";
	default: return "unknown";
	}
}

EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	switch (event) {
	case IBV_EVENT_CQ_ERR: return "CQ error";
	case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
	case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
	case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
	case IBV_EVENT_PORT_ACTIVE: return "port active";
	default: return "unknown";
	}
}





EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	(void)pd;
	(void)attr;
	errno = EOPNOTSUPP; /* address handles serve UD queue pairs, which Pagewire does not have */
	return NULL;
}

EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	(void)ah;
	return EOPNOTSUPP;
}


static struct ibv_context_ops context_ops = {
	.poll_cq = pw_poll_cq,
	.req_notify_cq = pw_req_notify_cq,
	.post_srq_recv = pw_post_srq_recv,
	.post_send = pw_post_send,
	.post_recv = pw_post_recv,
};
