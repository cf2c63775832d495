/*
 * The connection manager's queue pairs: rdma_create_qp and its kin (with the CQs librdmacm makes for
 * an id whose program names none), and the INIT, RTR, RTS and ERROR transitions librdmacm drives
 * with what the events carry (rdma_init_qp_attr hands the same attributes to programs that drive
 * their pair themselves).
 */
#include "cm_objects.h"
#include "cm_qp.h"

/* ---- queue pairs ---- */

uint32_t cm_random_psn(void)
{
	return (uint32_t)(lrand48() & 0xFFFFFF);
}

/* INIT, as librdmacm leaves a queue pair it creates: port 1, pkey 0, remote access for RC. */
static int qp_to_init(struct cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (qp->qp_type == IBV_QPT_UD) {
		attr.qkey = id->id.ps == RDMA_PS_IPOIB ? 0 : RDMA_UDP_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &attr, mask);
}

int cm_qp_to_rtr(struct cm_id *id)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_RTR};
	int mask = IBV_QP_STATE;
	if (id->id.qp->qp_type != IBV_QPT_UD) {
		attr.path_mtu = IBV_MTU_4096;
		attr.dest_qp_num = id->peer_qpn;
		attr.rq_psn = id->peer_psn;
		attr.max_dest_rd_atomic = id->responder_resources ? id->responder_resources : 1;
		attr.min_rnr_timer = 12;
		attr.ah_attr.dlid = (uint16_t)id->peer_lid;
		attr.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (id->id.qp->qp_type == IBV_QPT_RC)
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	return ibv_modify_qp(id->id.qp, &attr, mask);
}

int cm_qp_to_rts(struct cm_id *id)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_RTS, .sq_psn = id->psn};
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (id->id.qp->qp_type == IBV_QPT_RC) {
		attr.timeout = id->ack_timeout;
		attr.retry_cnt = id->retry_count;
		attr.rnr_retry = id->rnr_retry_count;
		attr.max_rd_atomic = id->initiator_depth ? id->initiator_depth : 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(id->id.qp, &attr, mask);
}

void cm_qp_to_error(struct cm_id *id)
{
	if (id->id.qp) {
		struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(id->id.qp, &attr, IBV_QP_STATE);
	}
}

/* CQs (with completion channels) for an id whose program named none, as librdmacm makes them. */
static int make_cqs(struct cm_id *id, struct ibv_qp_init_attr *attr)
{
	if (attr->send_cq && attr->recv_cq)
		return 0;
	id->cqs_made = 1;
	if (!attr->recv_cq) {
		id->id.recv_cq_channel = ibv_create_comp_channel(id->id.verbs);
		if (!id->id.recv_cq_channel)
			return -1;
		id->id.recv_cq = ibv_create_cq(id->id.verbs, (int)(attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1), id,
					       id->id.recv_cq_channel, 0);
		if (!id->id.recv_cq)
			return -1;
		attr->recv_cq = id->id.recv_cq;
	}
	if (!attr->send_cq) {
		id->id.send_cq_channel = ibv_create_comp_channel(id->id.verbs);
		if (!id->id.send_cq_channel)
			return -1;
		id->id.send_cq = ibv_create_cq(id->id.verbs, (int)(attr->cap.max_send_wr ? attr->cap.max_send_wr : 1), id,
					       id->id.send_cq_channel, 0);
		if (!id->id.send_cq)
			return -1;
		attr->send_cq = id->id.send_cq;
	}
	return 0;
}

EXPORT int rdma_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (!attr)
		return cm_fail(EINVAL);
	if (id->id.verbs && attr->pd && attr->pd->context != id->id.verbs)
		return cm_fail(EINVAL);
	struct ibv_qp_init_attr plain = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq ? attr->srq : id->id.srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
	};
	if (make_cqs(id, &plain)) {
		int e = errno;
		cm_destroy_cqs(id);
		return cm_fail(e ? e : ENOMEM);
	}
	struct ibv_pd *pd = attr->pd ? attr->pd : id->id.pd;
	struct ibv_qp *qp = ibv_create_qp(pd, &plain);
	if (!qp) {
		int e = errno;
		cm_destroy_cqs(id);
		return cm_fail(e ? e : ENOMEM);
	}
	attr->cap = plain.cap;
	if (qp_to_init(id, qp)) {
		int e = errno;
		ibv_destroy_qp(qp);
		cm_destroy_cqs(id);
		return cm_fail(e ? e : EINVAL);
	}
	id->id.qp = qp;
	/* A UD pair needs no peer: librdmacm takes it to RTS at once (ucma_init_ud_qp), ready for any address handle. */
	if (qp->qp_type == IBV_QPT_UD && (cm_qp_to_rtr(id) || cm_qp_to_rts(id))) {
		int e = errno;
		id->id.qp = NULL;
		ibv_destroy_qp(qp);
		cm_destroy_cqs(id);
		return cm_fail(e ? e : EINVAL);
	}
	/* id->srq stays what rdma_create_srq made: rdma_destroy_ep destroys that one, never the caller's. */
	id->id.pd = pd;
	id->id.send_cq = plain.send_cq;
	id->id.recv_cq = plain.recv_cq;
	return 0;
}

EXPORT int rdma_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (!qp_init_attr)
		return cm_fail(EINVAL);
	struct ibv_qp_init_attr_ex ex = {
		.qp_context = qp_init_attr->qp_context,
		.send_cq = qp_init_attr->send_cq,
		.recv_cq = qp_init_attr->recv_cq,
		.srq = qp_init_attr->srq,
		.cap = qp_init_attr->cap,
		.qp_type = qp_init_attr->qp_type,
		.sq_sig_all = qp_init_attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd ? pd : id->id.pd,
	};
	if (!ex.pd)
		return cm_fail(EINVAL);
	if (rdma_create_qp_ex(cm_id, &ex))
		return -1;
	qp_init_attr->cap = ex.cap;
	qp_init_attr->send_cq = id->id.send_cq;
	qp_init_attr->recv_cq = id->id.recv_cq;
	return 0;
}

EXPORT void rdma_destroy_qp(struct rdma_cm_id *cm_id)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (id->id.qp)
		ibv_destroy_qp(id->id.qp);
	id->id.qp = NULL;
	cm_destroy_cqs(id);
}

EXPORT int rdma_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	struct ibv_pd *pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : id->id.pd;
	if (!pd)
		return cm_fail(EINVAL);
	struct ibv_srq_init_attr plain = {.srq_context = attr->srq_context, .attr = attr->attr};
	struct ibv_srq *srq = ibv_create_srq(pd, &plain);
	if (!srq)
		return -1;
	id->id.srq = srq;
	id->id.pd = pd;
	return 0;
}

EXPORT int rdma_create_srq(struct rdma_cm_id *cm_id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex = {
		.srq_context = attr->srq_context, .attr = attr->attr, .comp_mask = IBV_SRQ_INIT_ATTR_PD, .pd = pd};
	return rdma_create_srq_ex(cm_id, &ex);
}

EXPORT void rdma_destroy_srq(struct rdma_cm_id *cm_id)
{
	if (cm_id->srq)
		ibv_destroy_srq(cm_id->srq);
	cm_id->srq = NULL;
}

void cm_destroy_cqs(struct cm_id *id)
{
	if (!id->cqs_made)
		return;
	if (id->id.recv_cq && id->id.recv_cq != id->id.send_cq)
		ibv_destroy_cq(id->id.recv_cq);
	if (id->id.send_cq)
		ibv_destroy_cq(id->id.send_cq);
	if (id->id.recv_cq_channel && id->id.recv_cq_channel != id->id.send_cq_channel)
		ibv_destroy_comp_channel(id->id.recv_cq_channel);
	if (id->id.send_cq_channel)
		ibv_destroy_comp_channel(id->id.send_cq_channel);
	id->id.send_cq = id->id.recv_cq = NULL;
	id->id.send_cq_channel = id->id.recv_cq_channel = NULL;
	id->cqs_made = 0;
}

EXPORT int rdma_init_qp_attr(struct rdma_cm_id *cm_id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	enum ibv_qp_state state = qp_attr->qp_state;
	memset(qp_attr, 0, sizeof(*qp_attr));
	qp_attr->qp_state = state;
	switch (state) {
	case IBV_QPS_INIT:
		qp_attr->port_num = 1;
		qp_attr->qp_access_flags =
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR:
		qp_attr->path_mtu = IBV_MTU_4096;
		qp_attr->dest_qp_num = id->peer_qpn;
		qp_attr->rq_psn = id->peer_psn;
		qp_attr->max_dest_rd_atomic = id->responder_resources ? id->responder_resources : 1;
		qp_attr->min_rnr_timer = 12;
		qp_attr->ah_attr.dlid = (uint16_t)id->peer_lid;
		qp_attr->ah_attr.port_num = 1;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC
				| IBV_QP_MIN_RNR_TIMER;
		return 0;
	case IBV_QPS_RTS:
		if (!id->psn)
			id->psn = cm_random_psn();
		qp_attr->sq_psn = id->psn;
		qp_attr->timeout = id->ack_timeout;
		qp_attr->retry_cnt = id->retry_count;
		qp_attr->rnr_retry = id->rnr_retry_count;
		qp_attr->max_rd_atomic = id->initiator_depth ? id->initiator_depth : 1;
		*qp_attr_mask =
			IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return cm_fail(EINVAL);
	}
}
