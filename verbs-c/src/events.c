/*
 * Events from the node: the event ring (completions, refusals, unmap requests) drained into the
 * program's CQs (the producer side of every CQ, pw_cq_push; cq.c is the consumer's), the session
 * stream's events (what the ring could not take, QP and SRQ events, the end of the session), the
 * context's reader thread, and ibv_get_async_event.
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
#include "cq.h"
#include "events.h"
#include "pager.h"
#include "qp.h"
#include "ring.h"
#include "trace.h"
#include "wire.h"

/*
 * Puts a completion on its CQ, which holds cq.cqe of them: one that finds it full is lost and the CQ's
 * owner hears IBV_EVENT_CQ_ERR, as from an HCA (and Soft-RoCE), unless the CQ was made to ignore
 * overruns. A CQ armed for solicited events only is woken by a solicited receive or an error.
 */
void pw_cq_push(struct pw_context *ctx, struct pw_cq *cq, const struct ibv_wc *wc, int solicited, uint64_t time_ns)
{
	pw_trace_mark(PW_HOP_CQ_PUSH);
	pthread_mutex_lock(&cq->lock);
	struct pw_wc_queue *q = &cq->queue;
	if (q->count == q->capacity) {
		pthread_mutex_unlock(&cq->lock);
		pw_log(PW_ERROR, "completion queue %p overflowed its %d entries: the completion of work request 0x%lx is lost", (void *)cq,
		       q->capacity, (unsigned long)wc->wr_id);
		if (!cq->ignore_overrun) {
			struct ibv_async_event ae;
			memset(&ae, 0, sizeof(ae));
			ae.event_type = IBV_EVENT_CQ_ERR;
			ae.element.cq = &cq->cq;
			pw_queue_async_event(ctx, &ae);
		}
		return;
	}
	struct pw_cqe *e = &q->entries[(q->head + q->count) % q->capacity];
	e->wc = *wc;
	e->time_ns = time_ns;
	q->count++;
	__atomic_add_fetch(&ctx->delivered, 1, __ATOMIC_SEQ_CST);
	int notify = cq->armed == PW_ARMED_NEXT || (cq->armed == PW_ARMED_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS));
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

/* The SRQ an event of the node names by its id (SRQ_LIMIT_REACHED), or NULL. */
struct ibv_srq *pw_srq_of(struct pw_context *ctx, uint32_t id)
{
	struct ibv_srq *found = NULL;
	pthread_mutex_lock(&ctx->qp_lock);
	for (int i = 0; i < ctx->srqs.count && !found; i++) {
		struct pw_srq *srq = ctx->srqs.items[i];
		if (srq->srq_id == id)
			found = &srq->srq;
	}
	pthread_mutex_unlock(&ctx->qp_lock);
	return found;
}

struct pw_qp *pw_qp_of(struct pw_context *ctx, uint32_t qpn)
{
	struct pw_qp *found = NULL;
	pthread_mutex_lock(&ctx->qp_lock);
	for (int i = 0; i < ctx->qps.count && !found; i++) {
		struct pw_qp *qp = ctx->qps.items[i];
		if (qp->qp.qp_num == qpn)
			found = qp;
	}
	pthread_mutex_unlock(&ctx->qp_lock);
	return found;
}

static enum ibv_wc_status wc_status(int32_t status)
{
	switch (status) {
	case PW_ST_SUCCESS:
		return IBV_WC_SUCCESS;
	case PW_ST_LOCAL_PROTECTION:
		return IBV_WC_LOC_PROT_ERR;
	case PW_ST_REMOTE_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case PW_ST_REMOTE_INVALID_REQUEST:
		return IBV_WC_REM_INV_REQ_ERR;
	case PW_ST_REMOTE_OPERATIONAL:
		return IBV_WC_REM_OP_ERR;
	case PW_ST_RETRY_EXCEEDED:
		return IBV_WC_RETRY_EXC_ERR;
	case PW_ST_RNR_RETRY_EXCEEDED:
		return IBV_WC_RNR_RETRY_EXC_ERR;
	case PW_ST_LOCAL_MEMORY:
		return IBV_WC_LOC_ACCESS_ERR;
	case PW_ST_FLUSHED:
		return IBV_WC_WR_FLUSH_ERR;
	case PW_ST_LOCAL_LENGTH:
		return IBV_WC_LOC_LEN_ERR;
	case PW_ST_WINDOW_BIND:
		return IBV_WC_MW_BIND_ERR;
	default:
		return IBV_WC_GENERAL_ERR;
	}
}

static enum ibv_wc_opcode wc_opcode(int32_t opcode)
{
	switch (opcode) {
	case PW_OP_WRITE:
	case PW_OP_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case PW_OP_READ:
		return IBV_WC_RDMA_READ;
	case PW_OP_FETCH_ADD:
		return IBV_WC_FETCH_ADD;
	case PW_OP_COMPARE_SWAP:
		return IBV_WC_COMP_SWAP;
	case PW_OP_RECV:
		return IBV_WC_RECV;
	case PW_OP_RECV_RDMA_WITH_IMM:
		return IBV_WC_RECV_RDMA_WITH_IMM;
	case PW_OP_BIND_WINDOW:
		return IBV_WC_BIND_MW;
	case PW_OP_LOCAL_INVALIDATE:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

/*
 * A completion into its CQ; `flags` are the record's PW_COMPLETION_* bits, `imm` the immediate or the invalidated rkey,
 * `value` a UD receive's source (PW_COMPLETION_DATAGRAM).
 */
static void deliver(struct pw_context *ctx, uint64_t wr_id, uint32_t qpn, int32_t opcode, enum ibv_wc_status status, uint32_t bytes,
		    uint32_t flags, uint64_t value, uint32_t imm, uint64_t time_ns, const char *error, int error_length,
		    uint32_t vendor_err)
{
	struct pw_qp *qp = pw_qp_of(ctx, qpn);
	if (!qp) {
		pw_log(PW_DEBUG, "a completion for queue pair %u, which is gone, is dropped", qpn);
		return;
	}
	if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR)
		pw_log(PW_WARN, "work request 0x%lx on queue pair %u failed (%s): %.*s", (unsigned long)wr_id, qpn,
		       ibv_wc_status_str(status), error_length, error ? error : "");
	/* An atomic's fetched word is already in its buffer: the node wrote it there before completing it. */
	int receive = opcode == PW_OP_RECV || opcode == PW_OP_RECV_RDMA_WITH_IMM;
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
	if (flags & PW_COMPLETION_DATAGRAM) {
		wc.src_qp = (uint32_t)value & 0xffffff;
		wc.slid = (uint16_t)(value >> 32);
		if (flags & PW_COMPLETION_GLOBAL_ROUTE)
			wc.wc_flags |= IBV_WC_GRH;
	}
	if (flags & PW_COMPLETION_WITH_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = imm;
	} else if (flags & PW_COMPLETION_INVALIDATED) {
		wc.wc_flags |= IBV_WC_WITH_INV;
		wc.invalidated_rkey = imm;
	}
	/* An error completion moves the pair to the error state, as an HCA's does; a UD receive's does not (a datagram too long for it). */
	if (status != IBV_WC_SUCCESS && !(receive && qp->qp.qp_type == IBV_QPT_UD && status != IBV_WC_WR_FLUSH_ERR))
		qp->qp.state = IBV_QPS_ERR;
	if (receive) {
		uint32_t *posted = qp->qp.srq ? &((struct pw_srq *)qp->qp.srq)->receives_posted : &qp->receives_posted;
		if (__atomic_load_n(posted, __ATOMIC_ACQUIRE) > 0)
			__atomic_sub_fetch(posted, 1, __ATOMIC_ACQ_REL);
	}
	struct ibv_cq *cq = receive ? qp->qp.recv_cq : qp->qp.send_cq;
	if (cq)
		pw_cq_push(ctx, (struct pw_cq *)cq, &wc, (flags & PW_COMPLETION_SOLICITED) != 0, time_ns);
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
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	deliver(ctx, wr_id, qpn, PW_OP_SEND, IBV_WC_LOC_QP_OP_ERR, 0, 0, 0, 0, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec,
		NULL, 0, (uint32_t)why);
}

static void on_event(void *arg, int32_t type, const uint8_t *b, int32_t length)
{
	struct pw_context *ctx = arg;
	if (type == PW_EV_COMPLETION && length >= PW_COMPLETION) {
		uint64_t wr_id, bytes, value, time_ns;
		uint32_t qpn, flags, imm;
		int32_t opcode, status, error_length;
		memcpy(&wr_id, b + PW_COMPLETION_ID, 8);
		memcpy(&qpn, b + PW_COMPLETION_QPN, 4);
		memcpy(&opcode, b + PW_COMPLETION_OPCODE, 4);
		memcpy(&status, b + PW_COMPLETION_STATUS, 4);
		memcpy(&error_length, b + PW_COMPLETION_ERROR_LENGTH, 4);
		memcpy(&bytes, b + PW_COMPLETION_BYTES, 8);
		memcpy(&value, b + PW_COMPLETION_VALUE, 8);
		memcpy(&flags, b + PW_COMPLETION_FLAGS, 4);
		memcpy(&imm, b + PW_COMPLETION_IMM, 4);
		memcpy(&time_ns, b + PW_COMPLETION_TIME, 8);
		if (error_length < 0 || error_length > length - PW_COMPLETION)
			error_length = 0;
		deliver(ctx, wr_id, qpn, opcode, wc_status(status), (uint32_t)bytes, flags, value, imm, time_ns,
			(const char *)b + PW_COMPLETION, error_length, 0);
	} else if (type == PW_EV_CPU_UNMAP && length >= PW_CPU_UNMAP) {
		uint64_t address, bytes;
		memcpy(&address, b + PW_CPU_UNMAP_ADDRESS, 8);
		memcpy(&bytes, b + PW_CPU_UNMAP_LENGTH, 8);
		pw_cpu_unmap(ctx, address, bytes);
	} else if (type == PW_EV_REFUSED && length >= PW_REFUSED) {
		/* RefusedRecord: wr id, qpn, gRPC status code, error length, (zero), error */
		uint64_t wr_id;
		uint32_t qpn, code;
		int32_t error_length;
		memcpy(&wr_id, b + PW_REFUSED_ID, 8);
		memcpy(&qpn, b + PW_REFUSED_QPN, 4);
		memcpy(&code, b + PW_REFUSED_CODE, 4);
		memcpy(&error_length, b + PW_REFUSED_ERROR_LENGTH, 4);
		if (error_length < 0 || error_length > length - PW_REFUSED)
			error_length = 0;
		refused(ctx, wr_id, qpn, code, (const char *)b + PW_REFUSED, error_length);
	}
}

/* A queue pair's asynchronous event from the node, as ibv_get_async_event reports it. */
static void queue_pair_event(struct pw_context *ctx, const Pagewire__Verbs__V1__QueuePairEventRaised *raised)
{
	struct pw_qp *qp = pw_qp_of(ctx, raised->qpn);
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
	pw_queue_async_event(ctx, &ae);
}

/* Moves what the event ring holds into the completion queues; one drainer at a time, the others go on. */
void pw_drain(struct pw_context *ctx)
{
	if (pthread_mutex_trylock(&ctx->event_lock))
		return;
	while (pw_ring_read(&ctx->events, on_event, ctx, 256) > 0)
		;
	pthread_mutex_unlock(&ctx->event_lock);
}

/* As pw_drain, waiting for a drainer at work to finish: on return, everything the ring held at the call is in the CQs. */
void pw_drain_all(struct pw_context *ctx)
{
	pthread_mutex_lock(&ctx->event_lock);
	while (pw_ring_read(&ctx->events, on_event, ctx, 256) > 0)
		;
	pthread_mutex_unlock(&ctx->event_lock);
}

/* A stream completion's flags, as a COMPLETION record carries them. */
static uint32_t completion_flags(const Pagewire__Verbs__V1__CompletionEvent *c)
{
	return (c->has_immediate ? PW_COMPLETION_WITH_IMM : 0) | (c->solicited ? PW_COMPLETION_SOLICITED : 0)
	       | (c->invalidated ? PW_COMPLETION_INVALIDATED : 0) | (c->source_lid ? PW_COMPLETION_DATAGRAM : 0)
	       | (c->global_route ? PW_COMPLETION_GLOBAL_ROUTE : 0);
}

/* A stream completion's source, as a COMPLETION record's value carries a UD receive's. */
static uint64_t completion_source(const Pagewire__Verbs__V1__CompletionEvent *c)
{
	return (uint64_t)c->source_qpn | (uint64_t)c->source_lid << 32;
}

/* Events the rings could not take come on the session stream (a full event ring, an SRQ's limit). */
static void on_session_event(struct pw_context *ctx, Pagewire__Verbs__V1__SessionEvent *ev)
{
	switch (ev->event_case) {
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_COMPLETIONS:
		pw_drain(ctx); /* what the ring holds came first */
		for (size_t i = 0; i < ev->completions->n_completions; i++) {
			Pagewire__Verbs__V1__CompletionEvent *c = ev->completions->completions[i];
			deliver(ctx, c->wr_id, c->qpn, c->opcode, wc_status(c->status), (uint32_t)c->bytes, completion_flags(c),
				completion_source(c), c->immediate, c->time_ns, c->error, (int)strlen(c->error), 0);
		}
		break;
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_COMPLETION: {
		Pagewire__Verbs__V1__CompletionEvent *c = ev->completion;
		pw_drain(ctx);
		deliver(ctx, c->wr_id, c->qpn, c->opcode, wc_status(c->status), (uint32_t)c->bytes, completion_flags(c),
			completion_source(c), c->immediate, c->time_ns, c->error, (int)strlen(c->error), 0);
		break;
	}
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_REFUSED:
		pw_drain(ctx);
		refused(ctx, ev->refused->wr_id, ev->refused->qpn, ev->refused->code, ev->refused->error, (int)strlen(ev->refused->error));
		break;
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_async_event ae;
		memset(&ae, 0, sizeof(ae));
		ae.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		ae.element.srq = NULL;
		/* the srq pointer is found by its id */
		ae.element.srq = pw_srq_of(ctx, ev->srq_limit_reached->srq_id);
		if (ae.element.srq)
			pw_queue_async_event(ctx, &ae);
		break;
	}
	case PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_QUEUE_PAIR_EVENT:
		pw_drain(ctx); /* completions before it first */
		queue_pair_event(ctx, ev->queue_pair_event);
		break;
	default:
		pw_drain(ctx); /* a doorbell */
		break;
	}
}

/* Queues an asynchronous event for ibv_get_async_event. */
void pw_queue_async_event(struct pw_context *ctx, const struct ibv_async_event *ae)
{
	if (write(ctx->async_pipe[1], ae, sizeof(*ae)) != sizeof(*ae))
		pw_log(PW_ERROR, "cannot queue an asynchronous event: %s", strerror(errno));
}

int pw_armed_cqs; /* completion queues armed across contexts (a hint for the reader) */

void *pw_reader_main(void *arg)
{
	struct pw_context *ctx = arg;
	while (!ctx->closing) {
		int armed = __atomic_load_n(&pw_armed_cqs, __ATOMIC_ACQUIRE) > 0;
		if (armed) {
			/* Someone sleeps on a channel: have the node ring the bell, then look once more. */
			__atomic_store_n(pw_ring_word(ctx, PW_RINGS_APP_ASLEEP), 1, __ATOMIC_SEQ_CST);
			pw_drain(ctx);
		}
		struct pollfd fds[2] = {{.fd = ctx->session.fd, .events = POLLIN}, {.fd = ctx->bell_fd, .events = POLLIN}};
		/*
		 * A poller sleeping on the bell (cq.c) takes its bytes itself (and drains what they announce): this thread
		 * leaves them, and looks again within a millisecond, so that a channel's waiter is not left without the
		 * bell for long once the sleeper is gone.
		 */
		int sleepers = __atomic_load_n(&ctx->bell_sleepers, __ATOMIC_SEQ_CST) > 0;
		/* Awake now and then even when no one waits on a channel: the node's unmap requests must not wait for a poll. */
		int n = poll(fds, ctx->bell_fd >= 0 && !sleepers ? 2 : 1, sleepers ? 1 : armed ? 50 : 5);
		if (n < 0 && errno != EINTR)
			break;
		if (ctx->bell_fd >= 0 && !sleepers && (fds[1].revents & POLLIN)
		    && __atomic_load_n(&ctx->bell_sleepers, __ATOMIC_SEQ_CST) == 0) {
			/*
			 * A poller that began to sleep after the poll above may have taken the bytes first: nothing to read
			 * is then no reason to give the bell up. Only its end (the node closed it) is.
			 */
			char sink[64];
			ssize_t got = recv(ctx->bell_fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				pw_log(PW_INFO, "%s: the node closed the bell; doorbells go on the session stream", ctx->dev->device.name);
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
					pw_queue_async_event(ctx, &ae);
					memset(&ae, 0, sizeof(ae));
					ae.event_type = IBV_EVENT_DEVICE_FATAL;
					pw_queue_async_event(ctx, &ae);
					ctx->port_down = 1;
				}
				break;
			}
			on_session_event(ctx, ev);
			protobuf_c_message_free_unpacked(&ev->base, NULL);
		}
		pw_drain(ctx);
	}
	return NULL;
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
