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

void pw_ring_node(struct pw_context *ctx)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int32_t one = 1;
	if (__atomic_load_n(pw_ring_word(ctx, PW_RINGS_NODE_ASLEEP), __ATOMIC_SEQ_CST) == 1
	    && __atomic_compare_exchange_n(pw_ring_word(ctx, PW_RINGS_NODE_ASLEEP), &one, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
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


int pw_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	return pw_post_receives(pw_ctx(ibsrq->context), 0, srq->srq_id, srq->max_sge, wr, bad);
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
	default: return 0;
	}
}

static void put_wr(uint8_t *w, uint64_t wr_id, int opcode, int flags, uint32_t lkey, uint64_t local, uint32_t length,
		   uint64_t remote, uint64_t rkey, uint64_t add, uint32_t imm, uint64_t swap)
{
	memset(w, 0, PW_POST_WR);
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
	struct pw_qp *qp = (struct pw_qp *)ibqp;
	struct pw_context *ctx = pw_ctx(ibqp->context);
	uint8_t record[PW_POST_HEADER + 32 * PW_POST_WR];
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
		int atomic = opcode == PW_OP_FETCH_ADD || opcode == PW_OP_COMPARE_SWAP;
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
			if (total > qp->cap.max_inline_data || opcode == PW_OP_READ || atomic) {
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
		} else if (opcode != PW_OP_SEND && opcode != PW_OP_SEND_WITH_IMM) {
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
			put_wr(body, wr->wr_id, opcode, flags, 0, 0, 0, remote, rkey, add, wr->imm_data, swap);
			e = put_list(ctx, PW_REQ_POST_LIST, ibqp->qp_num, 0, body, PW_POST_WR, wr->sg_list, wr->num_sge);
			if (e)
				break;
			continue;
		}
		put_wr(record + PW_POST_HEADER + count++ * PW_POST_WR, wr->wr_id, opcode, flags, lkey, local, length, remote, rkey, add,
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

int pw_post_receives(struct pw_context *ctx, uint32_t qpn, uint32_t srq_id, uint32_t max_sge, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad)
{
	uint8_t record[PW_RECV_HEADER + 64 * PW_RECV];
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
	return pw_post_receives(pw_ctx(ibqp->context), ibqp->qp_num, 0, ((struct pw_qp *)ibqp)->cap.max_recv_sge, wr, bad);
}

