/*
 * Queue pairs and shared receive queues: create, modify (the kernel's transition table, the node's
 * RESET/RTR/RTS/SQD/ERROR), query and destroy; the node owns the pair, the library its view of it.
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
#include "events.h"
#include "memory.h"
#include "post.h"
#include "qp.h"
#include "settings.h"
#include "wire.h"

/* ---- shared receive queues ------------------------------------------------------------------------- */

/* Enters an SRQ in its context's table (what the node's events name it by). */
static int add_srq(struct pw_context *ctx, struct pw_srq *srq)
{
	pthread_mutex_lock(&ctx->qp_lock);
	int e = pw_table_add(&ctx->srqs, srq, 8);
	pthread_mutex_unlock(&ctx->qp_lock);
	return e;
}

static void remove_srq(struct pw_context *ctx, struct pw_srq *srq)
{
	pthread_mutex_lock(&ctx->qp_lock);
	pw_table_remove(&ctx->srqs, srq);
	pthread_mutex_unlock(&ctx->qp_lock);
}

static int arm_srq(struct pw_context *ctx, struct pw_srq *srq, uint32_t limit)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__ArmSharedReceiveQueueRequest req = PAGEWIRE__VERBS__V1__ARM_SHARED_RECEIVE_QUEUE_REQUEST__INIT;
	req.endpoint = &ref;
	req.srq_id = srq->srq_id;
	req.limit = limit;
	int e = pw_call_void(&ctx->control, "ArmSharedReceiveQueue", &req.base,
			     &pagewire__verbs__v1__arm_shared_receive_queue_response__descriptor);
	if (!e)
		srq->limit = limit;
	return e;
}

static int destroy_srq_on_node(struct pw_context *ctx, uint32_t srq_id)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__DestroySharedReceiveQueueRequest req = PAGEWIRE__VERBS__V1__DESTROY_SHARED_RECEIVE_QUEUE_REQUEST__INIT;
	req.endpoint = &ref;
	req.srq_id = srq_id;
	return pw_call_void(&ctx->control, "DestroySharedReceiveQueue", &req.base,
			    &pagewire__verbs__v1__destroy_shared_receive_queue_response__descriptor);
}

EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct pw_context *ctx = pw_ctx(pd->context);
	if (attr->attr.max_sge > PW_MAX_SGE || attr->attr.max_wr > PW_MAX_WR || attr->attr.max_wr == 0
	    || attr->attr.srq_limit > attr->attr.max_wr) {
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
	uint32_t srq_id = reply->srq_id;
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	struct pw_srq *srq = calloc(1, sizeof(*srq));
	e = srq ? add_srq(ctx, srq) : ENOMEM;
	if (e) {
		destroy_srq_on_node(ctx, srq_id);
		free(srq);
		errno = e;
		return NULL;
	}
	srq->srq.context = pd->context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = srq_id;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	srq->srq_id = srq_id;
	srq->max_wr = attr->attr.max_wr;
	srq->max_sge = attr->attr.max_sge ? attr->attr.max_sge : 1;
	pw_pd_use(pd, 1);
	if (attr->attr.srq_limit)
		arm_srq(ctx, srq, attr->attr.srq_limit);
	return &srq->srq;
}

EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	if (mask & ~(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR))
		return EINVAL;
	if ((mask & IBV_SRQ_MAX_WR) && (attr->max_wr == 0 || attr->max_wr > PW_MAX_WR))
		return EINVAL;
	uint32_t max_wr = (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : srq->max_wr;
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > max_wr)
		return EINVAL;
	if (mask & IBV_SRQ_LIMIT) {
		int e = arm_srq(pw_ctx(ibsrq->context), srq, attr->srq_limit);
		if (e)
			return e;
	}
	srq->max_wr = max_wr;
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

/* ibv_destroy_srq: EBUSY while a queue pair still draws from it; what was posted is dropped. */
EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct pw_srq *srq = (struct pw_srq *)ibsrq;
	struct pw_context *ctx = pw_ctx(ibsrq->context);
	if (__atomic_load_n(&srq->users, __ATOMIC_ACQUIRE) > 0)
		return EBUSY;
	int e = destroy_srq_on_node(ctx, srq->srq_id);
	if (e)
		return e;
	remove_srq(ctx, srq);
	pw_pd_use(ibsrq->pd, -1);
	free(srq);
	return 0;
}

/* ---- queue pairs ----------------------------------------------------------------------------------- */

static int add_qp(struct pw_context *ctx, struct pw_qp *qp)
{
	pthread_mutex_lock(&ctx->qp_lock);
	int e = pw_table_add(&ctx->qps, qp, 16);
	pthread_mutex_unlock(&ctx->qp_lock);
	return e;
}

static void remove_qp(struct pw_context *ctx, struct pw_qp *qp)
{
	pthread_mutex_lock(&ctx->qp_lock);
	pw_table_remove(&ctx->qps, qp);
	pthread_mutex_unlock(&ctx->qp_lock);
}

static int destroy_on_node(struct pw_context *ctx, uint32_t qpn);

/* The send operations a queue pair from ibv_create_qp_ex can post with ibv_wr_*. */
#define SUPPORTED_SEND_OPS                                                                                                                 \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM               \
	 | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV   \
	 | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)

/* Creates an RC, UC or UD queue pair: the node's, then the library's view of it with its inline staging area. */
static struct ibv_qp *create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	struct pw_context *ctx = pw_ctx(context);
	struct ibv_pd *pd = attr->pd;
	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD) {
		pw_log(PW_WARN, "ibv_create_qp: RC, UC and UD queue pairs are supported (asked for type %d)", attr->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!pd || pd->context != context || attr->cap.max_send_sge > PW_MAX_SGE || attr->cap.max_recv_sge > PW_MAX_SGE
	    || attr->cap.max_inline_data > PW_MAX_INLINE || attr->cap.max_send_wr > PW_MAX_WR || attr->cap.max_recv_wr > PW_MAX_WR
	    || (attr->srq && attr->srq->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__CreateQueuePairRequest req = PAGEWIRE__VERBS__V1__CREATE_QUEUE_PAIR_REQUEST__INIT;
	req.endpoint = &ref;
	if (attr->srq)
		req.srq_id = ((struct pw_srq *)attr->srq)->srq_id;
	req.protection_domain = pd->handle;
	if (attr->qp_type == IBV_QPT_UC)
		req.transport = PAGEWIRE__VERBS__V1__QUEUE_PAIR_TRANSPORT__UNRELIABLE_CONNECTED;
	else if (attr->qp_type == IBV_QPT_UD)
		req.transport = PAGEWIRE__VERBS__V1__QUEUE_PAIR_TRANSPORT__UNRELIABLE_DATAGRAM;
	Pagewire__Verbs__V1__CreateQueuePairResponse *reply = NULL;
	int e = pw_call(&ctx->control, "CreateQueuePair", &req.base, &pagewire__verbs__v1__create_queue_pair_response__descriptor,
			(ProtobufCMessage **)&reply);
	if (e) {
		errno = e;
		return NULL;
	}
	uint32_t qpn = reply->address->qpn;
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	struct pw_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		destroy_on_node(ctx, qpn);
		errno = ENOMEM;
		return NULL;
	}
	qp->qp.context = context;
	qp->qp.qp_context = attr->qp_context;
	qp->qp.pd = pd;
	qp->qp.send_cq = attr->send_cq;
	qp->qp.recv_cq = attr->recv_cq;
	qp->qp.srq = attr->srq;
	qp->qp.qp_num = qpn;
	qp->qp.handle = qpn;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.qp_type = attr->qp_type;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);
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
	e = qp->inline_buf == MAP_FAILED || !qp->inline_mr ? (errno ? errno : ENOMEM) : 0;
	if (!e && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		e = pw_wr_init(qp);
	if (!e)
		e = add_qp(ctx, qp);
	if (e) {
		/* Nothing is left behind: the node's pair, the staging area and its registration go again. */
		pw_log(PW_ERROR, "ibv_create_qp: cannot set up queue pair %u: %s", qpn, strerror(e));
		destroy_on_node(ctx, qpn);
		if (qp->inline_mr)
			pw_dereg_mr(qp->inline_mr);
		if (qp->inline_buf != MAP_FAILED)
			munmap(qp->inline_buf, inline_bytes);
		pw_wr_free(qp);
		pthread_mutex_destroy(&qp->modify_lock);
		free(qp);
		errno = e;
		return NULL;
	}
	/* What the pair uses cannot go before it does (EBUSY), as libibverbs' use counts say. */
	pw_pd_use(pd, 1);
	pw_cq_use(attr->send_cq, 1);
	pw_cq_use(attr->recv_cq, 1);
	if (attr->srq)
		__atomic_add_fetch(&((struct pw_srq *)attr->srq)->users, 1, __ATOMIC_ACQ_REL);
	return &qp->qp;
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	struct ibv_qp *qp = create_qp(pd->context, &ex);
	attr->cap = ex.cap;
	return qp;
}

/* ibv_create_qp_ex: with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS the pair posts with ibv_wr_* (ibv_qp_to_qp_ex). */
struct ibv_qp *pw_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || (attr->comp_mask & ~known)) {
		pw_log(PW_WARN, "ibv_create_qp_ex: attributes 0x%x are not supported (a PD is required)", attr->comp_mask & ~known);
		errno = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr->send_ops_flags & ~(uint64_t)SUPPORTED_SEND_OPS)) {
		pw_log(PW_WARN, "ibv_create_qp_ex: send operations 0x%llx are not supported",
		       (unsigned long long)(attr->send_ops_flags & ~(uint64_t)SUPPORTED_SEND_OPS));
		errno = EOPNOTSUPP;
		return NULL;
	}
	return create_qp(context, attr);
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
	pw_drain(ctx);
	remove_qp(ctx, qp);
	if (qp->inline_mr) {
		size_t n = qp->inline_mr->length;
		pw_dereg_mr(qp->inline_mr);
		munmap(qp->inline_buf, n);
	}
	pw_wr_free(qp);
	pw_pd_use(ibqp->pd, -1);
	pw_cq_use(ibqp->send_cq, -1);
	pw_cq_use(ibqp->recv_cq, -1);
	if (ibqp->srq)
		__atomic_sub_fetch(&((struct pw_srq *)ibqp->srq)->users, 1, __ATOMIC_ACQ_REL);
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
int pw_modify_qp_rate_limit(struct ibv_qp *ibqp, struct ibv_qp_rate_limit_attr *attr)
{
	struct pw_context *ctx = pw_ctx(ibqp->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__SetQueuePairRateLimitRequest req = PAGEWIRE__VERBS__V1__SET_QUEUE_PAIR_RATE_LIMIT_REQUEST__INIT;
	req.endpoint = &ref;
	req.qpn = ibqp->qp_num;
	req.bytes_per_second = (uint64_t)attr->rate_limit * 1000 / 8;
	req.burst_bytes = attr->max_burst_sz;
	return pw_call_void(&ctx->control, "SetQueuePairRateLimit", &req.base,
			    &pagewire__verbs__v1__set_queue_pair_rate_limit_response__descriptor);
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
		 | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC
		 | IBV_QP_PORT},
};

/* A UC pair's, from the same table: no acknowledgement timer, retries, RNR timer or RDMA READ resources. */
#define UC_PATH_OPTIONAL (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE)
static const struct transition uc_transitions[] = {
	{IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
	{IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
	{IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	 IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
	{IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | UC_PATH_OPTIONAL | IBV_QP_RATE_LIMIT},
	{IBV_QPS_RTS, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | UC_PATH_OPTIONAL | IBV_QP_RATE_LIMIT},
	{IBV_QPS_SQD, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | UC_PATH_OPTIONAL},
	{IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
	{IBV_QPS_SQD, IBV_QPS_SQD, 0,
	 IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE | IBV_QP_PORT},
};

/* A UD pair's: no peer, no path; a Q_Key from INIT on, changeable in every state but RESET. */
static const struct transition ud_transitions[] = {
	{IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0},
	{IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
	{IBV_QPS_INIT, IBV_QPS_RTR, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
	{IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY | IBV_QP_RATE_LIMIT},
	{IBV_QPS_RTS, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY | IBV_QP_RATE_LIMIT},
	{IBV_QPS_SQD, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY},
	{IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
	{IBV_QPS_SQD, IBV_QPS_SQD, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
};

static int transition_ok(enum ibv_qp_type type, enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
	int attrs = mask & ~IBV_QP_STATE;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return (attrs & ~IBV_QP_CUR_STATE) == 0; /* from any state, taking nothing else */
	const struct transition *table = type == IBV_QPT_UC ? uc_transitions : type == IBV_QPT_UD ? ud_transitions : transitions;
	size_t n = type == IBV_QPT_UC	? sizeof(uc_transitions) / sizeof(uc_transitions[0])
		   : type == IBV_QPT_UD ? sizeof(ud_transitions) / sizeof(ud_transitions[0])
					: sizeof(transitions) / sizeof(transitions[0]);
	for (size_t i = 0; i < n; i++)
		if (table[i].from == from && table[i].to == to)
			return (attrs & table[i].required) == table[i].required && (attrs & ~(table[i].required | table[i].optional)) == 0;
	return 0;
}

/* InfiniBand's 5-bit RNR timer: the delay an RNR NAK asks for, in nanoseconds (0 is the longest, 655.36 ms). */
static uint64_t rnr_timer_ns(uint8_t t)
{
	static const uint32_t us[32] = {655360, 10,    20,    30,    40,    60,	    80,	    120,    160,    240,   320,
					480,	640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
					20480,	30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
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
	} else if (!transition_ok(ibqp->qp_type, from, to, mask)) {
		pw_log(PW_WARN, "ibv_modify_qp: queue pair %u cannot go from state %d to %d with attribute mask 0x%x", ibqp->qp_num, from,
		       to, mask);
		e = EINVAL;
	} else if ((mask & IBV_QP_PORT) && attr->port_num != 1) {
		pw_log(PW_DEBUG, "ibv_modify_qp: queue pair %u: the device has port 1 only, not %u", ibqp->qp_num, attr->port_num);
		e = EINVAL;
	} else if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096)) {
		pw_log(PW_DEBUG, "ibv_modify_qp: queue pair %u: path_mtu %d is not an IBV_MTU", ibqp->qp_num, attr->path_mtu);
		e = EINVAL;
	} else if ((mask & IBV_QP_RETRY_CNT && attr->retry_cnt > 7) || (mask & IBV_QP_RNR_RETRY && attr->rnr_retry > 7)
		   || (mask & IBV_QP_TIMEOUT && attr->timeout > 31) || (mask & IBV_QP_MIN_RNR_TIMER && attr->min_rnr_timer > 31)) {
		pw_log(PW_DEBUG, "ibv_modify_qp: queue pair %u: retry_cnt and rnr_retry take 0 to 7, timeout and min_rnr_timer 0 to 31",
		       ibqp->qp_num);
		e = EINVAL;
	}
	Pagewire__Verbs__V1__ModifyQueuePairRequest req = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__INIT;
	Pagewire__Verbs__V1__QpAddress address = PAGEWIRE__VERBS__V1__QP_ADDRESS__INIT;
	Pagewire__Verbs__V1__Access remote_access[5];
	if (!e && to == IBV_QPS_RESET && from != IBV_QPS_RESET) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__RESET;
		e = modify_on_node(ctx, ibqp->qp_num, &req);
		if (!e) {
			/* A reset pair starts over: what query_qp reports too. */
			struct ibv_qp_attr fresh;
			memset(&fresh, 0, sizeof(fresh));
			qp->attr = fresh;
			qp->sqd_notify = 0;
			__atomic_store_n(&qp->receives_posted, 0, __ATOMIC_RELEASE); /* dropped without completions */
		}
	} else if (!e && to == IBV_QPS_ERR && from != IBV_QPS_ERR) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__ERROR;
		e = modify_on_node(ctx, ibqp->qp_num, &req);
	} else if (!e && to == IBV_QPS_RTR && ibqp->qp_type == IBV_QPT_UD) {
		/* No peer: the pair takes datagrams carrying its Q_Key (set in INIT, or now). */
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__READY_TO_RECEIVE;
		req.attributes = ATTRIBUTE(QKEY);
		req.qkey = mask & IBV_QP_QKEY ? attr->qkey : qp->attr.qkey;
		e = modify_on_node(ctx, ibqp->qp_num, &req);
	} else if (!e && to == IBV_QPS_RTR) {
		const char *peer = peer_of_lid(ctx, attr->ah_attr.dlid);
		if (!peer) {
			pw_log(PW_WARN, "ibv_modify_qp: LID %u is neither node %s's (%u) nor any of its peers'", attr->ah_attr.dlid,
			       ctx->node_id, ctx->lid);
			e = EINVAL;
		} else {
			address.node_id = (char *)peer;
			address.qpn = attr->dest_qp_num;
			/* A verbs program exchanges LID, QPN and PSN only: credits and page size are the peer's configuration, the same as ours. */
			address.initial_credits = ctx->initial_credits;
			address.page_size = ctx->page_size;
			req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__READY_TO_RECEIVE;
			req.peer = &address;
			req.attributes = ATTRIBUTE(RECEIVE_PSN) | ATTRIBUTE(RNR_DELAY) | ATTRIBUTE(REMOTE_ACCESS);
			req.receive_psn = attr->rq_psn & 0xffffff;
			req.remote_access = pw_access_list((mask & IBV_QP_ACCESS_FLAGS) ? attr->qp_access_flags : qp->attr.qp_access_flags,
							   &req.n_remote_access, remote_access);
			req.rnr_delay_ns = rnr_timer_ns(attr->min_rnr_timer);
			e = modify_on_node(ctx, ibqp->qp_num, &req);
		}
	} else if (!e && to == IBV_QPS_RTS) {
		req.state = PAGEWIRE__VERBS__V1__MODIFY_QUEUE_PAIR_REQUEST__STATE__READY_TO_SEND;
		if (mask & IBV_QP_QKEY) {
			req.attributes |= ATTRIBUTE(QKEY);
			req.qkey = attr->qkey;
		}
		if (mask & IBV_QP_ACCESS_FLAGS) {
			req.attributes |= ATTRIBUTE(REMOTE_ACCESS);
			req.remote_access = pw_access_list(attr->qp_access_flags, &req.n_remote_access, remote_access);
		}
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
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
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
		init_attr->qp_type = ibqp->qp_type;
		init_attr->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

/* The pair's extended send API, when it was created with send operations (ibv_create_qp_ex), else NULL. */
EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct pw_qp *p = (struct pw_qp *)qp;
	return p->batch ? &p->qp_ex : NULL;
}
