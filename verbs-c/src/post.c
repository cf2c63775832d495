/*
 * Posting: work requests and receives become records on the session's request ring (ring module's
 * PostRecord, PostReceiveRecord, ScatterGatherRecord), and the node is rung when it sleeps.
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
#include "memory.h"
#include "post.h"
#include "ring.h"
#include "trace.h"
#include "wire.h"

void pw_ring_node(struct pw_context *ctx)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int32_t one = 1;
	if (__atomic_load_n(pw_ring_word(ctx, PW_RINGS_NODE_ASLEEP), __ATOMIC_SEQ_CST) == 1
	    && __atomic_compare_exchange_n(pw_ring_word(ctx, PW_RINGS_NODE_ASLEEP), &one, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		pw_trace_mark(PW_HOP_NODE_BELL);
		char b = 1;
		if (ctx->bell_fd < 0 || send(ctx->bell_fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			Pagewire__Verbs__V1__SessionRequest req = PAGEWIRE__VERBS__V1__SESSION_REQUEST__INIT;
			Pagewire__Verbs__V1__Doorbell bell = PAGEWIRE__VERBS__V1__DOORBELL__INIT;
			req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_DOORBELL;
			req.doorbell = &bell;
			pw_session_send(&ctx->session, &req);
			__atomic_add_fetch(&ctx->stream_doorbells, 1, __ATOMIC_RELAXED);
		}
	}
}


int pw_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	return pw_post_receives(pw_ctx(ibsrq->context), 0, srq->srq_id, srq->max_sge, &srq->receives_posted, srq->max_wr, wr, bad);
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
			pw_ring_node(ctx);
			return 0;
		}
		if (length > ctx->requests.max_message)
			return EINVAL;
		pw_ring_node(ctx);
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
	return put_record(ctx, PW_REQ_POST, record, PW_POST_HEADER + count * PW_POST_WR);
}

/* A POST_RECEIVE record (ring's PostReceiveRecord) of `count` receives already written after its header. */
static int put_receives(struct pw_context *ctx, uint8_t *record, uint32_t qpn, uint32_t srq_id, int count)
{
	uint32_t n = (uint32_t)count, zero = 0;
	memcpy(record, &qpn, 4);
	memcpy(record + 4, &srq_id, 4);
	memcpy(record + 8, &n, 4);
	memcpy(record + 12, &zero, 4);
	return put_record(ctx, PW_REQ_POST_RECEIVE, record, PW_RECV_HEADER + count * PW_RECV);
}

static int wire_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: return PW_OP_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM: return PW_OP_WRITE_WITH_IMM;
	case IBV_WR_SEND: return PW_OP_SEND;
	case IBV_WR_SEND_WITH_IMM: return PW_OP_SEND_WITH_IMM;
	case IBV_WR_RDMA_READ: return PW_OP_READ;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return PW_OP_FETCH_ADD;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return PW_OP_COMPARE_SWAP;
	case IBV_WR_BIND_MW: return PW_OP_BIND_WINDOW;
	case IBV_WR_LOCAL_INV: return PW_OP_LOCAL_INVALIDATE;
	case IBV_WR_SEND_WITH_INV: return PW_OP_SEND_WITH_INVALIDATE;
	default: return 0;
	}
}

static void put_wr(uint8_t *w, uint64_t wr_id, int opcode, int flags, uint32_t lkey, uint64_t local, uint32_t length,
		   uint64_t remote, uint64_t rkey, uint64_t add, uint32_t imm, uint64_t swap, uint32_t counter)
{
	memset(w, 0, PW_POST_WR);
	memcpy(w + PW_WR_COUNTER, &counter, 4);
	int32_t op = (opcode & 0xFFFF) | flags;
	memcpy(w + PW_WR_ID, &wr_id, 8);
	memcpy(w + PW_WR_OPCODE, &op, 4);
	memcpy(w + PW_WR_LKEY, &lkey, 4);
	memcpy(w + PW_WR_LOCAL, &local, 8);
	memcpy(w + PW_WR_LENGTH, &length, 4);
	memcpy(w + PW_WR_REMOTE, &remote, 8);
	memcpy(w + PW_WR_RKEY, &rkey, 8);
	memcpy(w + PW_WR_ADD, &add, 8);
	memcpy(w + PW_WR_IMM, &imm, 4);
	memcpy(w + PW_WR_SWAP, &swap, 8);
}

/*
 * A POST_LIST or POST_RECEIVE_LIST record (ring's ScatterGatherRecord): one work request or receive, whose
 * `body` is already written, followed by its elements.
 */
static int put_list(struct pw_context *ctx, int32_t type, uint32_t qpn, uint32_t srq_id, const uint8_t *body, int body_bytes,
		    const struct ibv_sge *sg, int n)
{
	uint8_t record[PW_LIST_HEADER + PW_POST_WR + PW_MAX_SGE * PW_LIST_ELEMENT];
	uint32_t count = (uint32_t)n, zero = 0;
	memcpy(record, &qpn, 4);
	memcpy(record + 4, &srq_id, 4);
	memcpy(record + 8, &count, 4);
	memcpy(record + 12, &zero, 4);
	memcpy(record + PW_LIST_HEADER, body, (size_t)body_bytes);
	for (int i = 0; i < n; i++) {
		uint8_t *e = record + PW_LIST_HEADER + body_bytes + i * PW_LIST_ELEMENT;
		memcpy(e + PW_ELEMENT_LKEY, &sg[i].lkey, 4);
		memcpy(e + PW_ELEMENT_LENGTH, &sg[i].length, 4);
		memcpy(e + PW_ELEMENT_ADDRESS, &sg[i].addr, 8);
	}
	return put_record(ctx, type, record, PW_LIST_HEADER + body_bytes + n * PW_LIST_ELEMENT);
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

int pw_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return pw_post_send_as(ibqp, wr, bad, 0);
}

/* ibv_post_send; `type1_bind` lets a bind of a type 1 window through (ibv_bind_mw's own post). */
int pw_post_send_as(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad, int type1_bind)
{
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	struct pw_context *ctx = pw_ctx(ibqp->context);
	uint8_t record[PW_POST_HEADER + 32 * PW_POST_WR];
	int count = 0;
	int e = 0;
	pw_trace_mark(PW_HOP_POST_SEND);
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
		if (ibqp->qp_type == IBV_QPT_UD
		    && ((opcode != PW_OP_SEND && opcode != PW_OP_SEND_WITH_IMM) || !wr->wr.ud.ah || wr->wr.ud.ah->pd != ibqp->pd)) {
			pw_log(PW_DEBUG, "ibv_post_send: queue pair %u is UD: it posts SENDs, each with an address handle of its PD", ibqp->qp_num);
			e = EINVAL;
			break;
		}
		if (ibqp->qp_type == IBV_QPT_UC
		    && (opcode == PW_OP_READ || opcode == PW_OP_FETCH_ADD || opcode == PW_OP_COMPARE_SWAP || opcode == PW_OP_BIND_WINDOW)) {
			pw_log(PW_DEBUG, "ibv_post_send: queue pair %u is UC, which carries WRITEs and SENDs", ibqp->qp_num);
			e = EINVAL; /* as Soft-RoCE refuses them on UC */
			break;
		}
		int atomic = opcode == PW_OP_FETCH_ADD || opcode == PW_OP_COMPARE_SWAP;
		int window_op = opcode == PW_OP_BIND_WINDOW || opcode == PW_OP_LOCAL_INVALIDATE;
		int flags = (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED) ? 0 : PW_FLAG_UNSIGNALED)
			    | (wr->send_flags & IBV_SEND_FENCE ? PW_FLAG_FENCE : 0) | (wr->send_flags & IBV_SEND_SOLICITED ? PW_FLAG_SOLICITED : 0);
		uint32_t lkey = 0;
		uint64_t local = 0;
		uint32_t length = 0;
		int listed = 0;
		if (wr->send_flags & IBV_SEND_INLINE) {
			size_t total = 0;
			for (int i = 0; i < wr->num_sge; i++)
				total += wr->sg_list[i].length;
			if (total > qp->cap.max_inline_data || opcode == PW_OP_READ || atomic || window_op) {
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
		} else if (!window_op) {
			e = local_range(ctx, wr->sg_list, wr->num_sge, &lkey, &local, &length, &listed);
			if (e)
				break;
		}
		uint64_t remote = 0, rkey = 0, add = 0, swap = 0;
		uint32_t counter = 0, imm = wr->imm_data; /* SEND_WITH_INV's invalidate_rkey shares imm_data's place */
		if (opcode == PW_OP_BIND_WINDOW) {
			/* The window's new rkey (the program's ibv_inc_rkey), the range, the region and the rights; in force from now. */
			const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;
			if (!wr->bind_mw.mw || (wr->bind_mw.mw->type == IBV_MW_TYPE_1 && !type1_bind) || wr->bind_mw.mw->pd != ibqp->pd
			    || (b->mr && b->mr->pd != ibqp->pd)) {
				e = EINVAL; /* a type 1 window is bound by ibv_bind_mw, not by a work request */
				break;
			}
			rkey = wr->bind_mw.rkey;
			remote = b->addr;
			add = b->length;
			counter = b->mr ? b->mr->lkey : 0;
			swap = pw_rights(b->mw_access_flags);
			if (b->length && !b->mr) {
				e = EINVAL;
				break;
			}
			wr->bind_mw.mw->rkey = wr->bind_mw.rkey;
		} else if (opcode == PW_OP_LOCAL_INVALIDATE) {
			rkey = wr->invalidate_rkey;
		} else if (atomic) {
			/* The fetched word lands in the request's own buffer (its one 8-byte element), written by the node. */
			remote = wr->wr.atomic.remote_addr;
			rkey = wr->wr.atomic.rkey;
			add = wr->wr.atomic.compare_add;
			swap = wr->wr.atomic.swap;
		} else if (ibqp->qp_type == IBV_QPT_UD) {
			const struct pw_ah *ah = (const struct pw_ah *)wr->wr.ud.ah;
			flags |= PW_FLAG_DATAGRAM;
			remote = ah->dlid | (ah->global ? PW_DATAGRAM_GLOBAL : 0);
			rkey = wr->wr.ud.remote_qpn | (uint64_t)wr->wr.ud.remote_qkey << 32;
		} else if (opcode != PW_OP_SEND && opcode != PW_OP_SEND_WITH_IMM && opcode != PW_OP_SEND_WITH_INVALIDATE) {
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
			uint8_t body[PW_POST_WR];
			put_wr(body, wr->wr_id, opcode, flags, 0, 0, 0, remote, rkey, add, imm, swap, counter);
			e = put_list(ctx, PW_REQ_POST_LIST, ibqp->qp_num, 0, body, PW_POST_WR, wr->sg_list, wr->num_sge);
			if (e)
				break;
			continue;
		}
		put_wr(record + PW_POST_HEADER + count++ * PW_POST_WR, wr->wr_id, opcode, flags, lkey, local, length, remote, rkey, add,
		       imm, swap, counter);
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

/*
 * Posts receives to a queue pair's receive queue or a shared one. The queue holds `depth` (max_recv_wr, the SRQ's
 * max_wr): a post past it is ENOMEM and names its request, as a provider's full queue is; *posted counts what is
 * posted and not completed (the reader takes each completion off).
 */
int pw_post_receives(struct pw_context *ctx, uint32_t qpn, uint32_t srq_id, uint32_t max_sge, uint32_t *posted, uint32_t depth,
		     struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	uint8_t record[PW_RECV_HEADER + 64 * PW_RECV];
	int count = 0;
	int e = 0;
	pw_trace_mark(PW_HOP_POST_RECV);
	pthread_mutex_lock(&ctx->post_lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > (int)max_sge) {
			e = EINVAL;
			break;
		}
		if (__atomic_load_n(posted, __ATOMIC_ACQUIRE) >= depth) {
			pw_log(PW_DEBUG, "post_recv: the receive queue holds its %u receives; work request 0x%lx is refused", depth,
			       (unsigned long)wr->wr_id);
			e = ENOMEM;
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
		uint8_t body[PW_RECV];
		uint8_t *r = listed ? body : record + PW_RECV_HEADER + count * PW_RECV;
		uint32_t no_key = 0, no_length = 0;
		uint64_t no_address = 0;
		memcpy(r + PW_RECV_ID, &wr->wr_id, 8);
		memcpy(r + PW_RECV_LKEY, listed ? &no_key : &lkey, 4);
		memcpy(r + PW_RECV_LENGTH, listed ? &no_length : &length, 4);
		memcpy(r + PW_RECV_ADDRESS, listed ? &no_address : &address, 8);
		if (listed) {
			e = put_list(ctx, PW_REQ_POST_RECEIVE_LIST, qpn, srq_id, body, PW_RECV, wr->sg_list, wr->num_sge);
			if (e)
				break;
		} else {
			count++;
		}
		__atomic_add_fetch(posted, 1, __ATOMIC_ACQ_REL);
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
int pw_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (ibqp->srq || ibqp->state == IBV_QPS_RESET) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	return pw_post_receives(pw_ctx(ibqp->context), ibqp->qp_num, 0, qp->cap.max_recv_sge, &qp->receives_posted, qp->cap.max_recv_wr, wr,
				bad);
}

/* ---- the extended send API: ibv_wr_start, ibv_wr_<op>, ibv_wr_set_*, ibv_wr_complete ------------- */

static inline struct pw_qp *qp_of_ex(struct ibv_qp_ex *x) { return (struct pw_qp *)x; }

/* Latches the batch's first error: ibv_wr_complete returns it and posts nothing. */
static void batch_fail(struct pw_qp *qp, int e)
{
	if (!qp->batch->error)
		qp->batch->error = e;
}

/* The request ibv_wr_<op> starts, taking wr_id and wr_flags as the program set them; NULL once the batch is full. */
static struct ibv_send_wr *next_wr(struct ibv_qp_ex *x, enum ibv_wr_opcode opcode)
{
	struct pw_qp *qp = qp_of_ex(x);
	struct pw_wr_batch *b = qp->batch;
	if (b->count == (int)qp->cap.max_send_wr) {
		batch_fail(qp, ENOMEM);
		return NULL;
	}
	struct ibv_send_wr *wr = &b->wrs[b->count];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = x->wr_id;
	wr->send_flags = x->wr_flags;
	wr->opcode = opcode;
	wr->sg_list = &b->sges[(size_t)b->count * (qp->cap.max_send_sge ? qp->cap.max_send_sge : 1)];
	b->count++;
	return wr;
}

/* The request the last ibv_wr_<op> started, for ibv_wr_set_*; NULL (an error) when there is none. */
static struct ibv_send_wr *current_wr(struct ibv_qp_ex *x)
{
	struct pw_qp *qp = qp_of_ex(x);
	if (qp->batch->count == 0) {
		batch_fail(qp, EINVAL);
		return NULL;
	}
	return &qp->batch->wrs[qp->batch->count - 1];
}

static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_RDMA_WRITE);
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr, __be32 imm)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
		wr->imm_data = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_RDMA_READ);
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void wr_send(struct ibv_qp_ex *x)
{
	next_wr(x, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_SEND_WITH_IMM);
	if (wr)
		wr->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *x, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_SEND_WITH_INV);
	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr, uint64_t compare, uint64_t swap)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = compare;
		wr->wr.atomic.swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr, uint64_t add)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = add;
	}
}

static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_BIND_MW);
	if (wr) {
		wr->bind_mw.mw = mw;
		wr->bind_mw.rkey = rkey;
		wr->bind_mw.bind_info = *info;
	}
}

static void wr_local_inv(struct ibv_qp_ex *x, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = next_wr(x, IBV_WR_LOCAL_INV);
	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_send_wr *wr = current_wr(x);
	if (wr) {
		wr->sg_list[0] = (struct ibv_sge){.addr = addr, .length = length, .lkey = lkey};
		wr->num_sge = 1;
	}
}

static void wr_set_sge_list(struct ibv_qp_ex *x, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct pw_qp *qp = qp_of_ex(x);
	struct ibv_send_wr *wr = current_wr(x);
	if (!wr)
		return;
	if (num_sge > qp->cap.max_send_sge) {
		batch_fail(qp, EINVAL);
		return;
	}
	memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));
	wr->num_sge = (int)num_sge;
}

/* Inline data is copied now, as an HCA copies it into the WQE: the program may reuse its buffer at once. */
static void wr_set_inline_data_list(struct ibv_qp_ex *x, size_t num_buf, const struct ibv_data_buf *buf_list)
{
	struct pw_qp *qp = qp_of_ex(x);
	struct ibv_send_wr *wr = current_wr(x);
	if (!wr)
		return;
	size_t total = 0;
	for (size_t i = 0; i < num_buf; i++)
		total += buf_list[i].length;
	if (total > qp->cap.max_inline_data) {
		batch_fail(qp, EINVAL);
		return;
	}
	uint8_t *slot = qp->batch->inline_data + (size_t)(qp->batch->count - 1) * qp->cap.max_inline_data;
	size_t at = 0;
	for (size_t i = 0; i < num_buf; i++) {
		memcpy(slot + at, buf_list[i].addr, buf_list[i].length);
		at += buf_list[i].length;
	}
	wr->sg_list[0] = (struct ibv_sge){.addr = (uintptr_t)slot, .length = (uint32_t)total, .lkey = 0};
	wr->num_sge = total ? 1 : 0;
	wr->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t length)
{
	struct ibv_data_buf one = {.addr = addr, .length = length};
	wr_set_inline_data_list(x, 1, &one);
}

/* A UD pair's destination for the request under construction; on a connected pair the batch fails, as a provider refuses it. */
static void wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ibv_send_wr *wr = current_wr(x);
	if (!wr)
		return;
	if (qp_of_ex(x)->qp.qp_type != IBV_QPT_UD) {
		batch_fail(qp_of_ex(x), EINVAL);
		return;
	}
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = remote_qpn;
	wr->wr.ud.remote_qkey = remote_qkey;
}

/* What no pair here has a use for (XRC, TSO, atomic write): the batch fails, as a provider refuses it. */

static void wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t remote_srqn)
{
	(void)remote_srqn;
	batch_fail(qp_of_ex(x), EINVAL);
}

static void wr_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	batch_fail(qp_of_ex(x), EOPNOTSUPP);
}

static void wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr, const void *atomic_wr)
{
	(void)rkey;
	(void)remote_addr;
	(void)atomic_wr;
	batch_fail(qp_of_ex(x), EOPNOTSUPP);
}

static void wr_start(struct ibv_qp_ex *x)
{
	struct pw_qp *qp = qp_of_ex(x);
	qp->batch->count = 0;
	qp->batch->error = 0;
}

/* Posts the batch as one list (ibv_post_send), or nothing and the first error a call of the batch met. */
static int wr_complete(struct ibv_qp_ex *x)
{
	struct pw_qp *qp = qp_of_ex(x);
	struct pw_wr_batch *b = qp->batch;
	int e = b->error;
	int count = b->count;
	b->count = 0;
	b->error = 0;
	if (e || count == 0)
		return e;
	for (int i = 0; i < count; i++)
		b->wrs[i].next = i + 1 < count ? &b->wrs[i + 1] : NULL;
	struct ibv_send_wr *bad;
	return pw_post_send(&qp->qp, b->wrs, &bad);
}

static void wr_abort(struct ibv_qp_ex *x)
{
	struct pw_qp *qp = qp_of_ex(x);
	qp->batch->count = 0;
	qp->batch->error = 0;
}

int pw_wr_init(struct pw_qp *qp)
{
	struct pw_wr_batch *b = calloc(1, sizeof(*b));
	size_t per = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	if (b) {
		b->wrs = calloc(qp->cap.max_send_wr, sizeof(*b->wrs));
		b->sges = calloc(qp->cap.max_send_wr * per, sizeof(*b->sges));
		b->inline_data = malloc((size_t)qp->cap.max_send_wr * qp->cap.max_inline_data);
	}
	if (!b || !b->wrs || !b->sges || !b->inline_data) {
		if (b) {
			free(b->wrs);
			free(b->sges);
			free(b->inline_data);
			free(b);
		}
		return ENOMEM;
	}
	qp->batch = b;
	struct ibv_qp_ex *x = &qp->qp_ex;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_atomic_write = wr_atomic_write;
	return 0;
}

void pw_wr_free(struct pw_qp *qp)
{
	if (qp->batch) {
		free(qp->batch->wrs);
		free(qp->batch->sges);
		free(qp->batch->inline_data);
		free(qp->batch);
		qp->batch = NULL;
	}
}

