/*
 * Connecting an id, as librdmacm does it: the REQ's, REP's and REJ's parameters (rdma_connect, rdma_accept,
 * rdma_reject), the queue pair moved through RTR and RTS where the library made it, establishing, and
 * DISCONNECT; and rdma_migrate_id, which moves an id to another channel.
 */
#include "cm_objects.h"
#include "cm_node.h"
#include "cm_events.h"
#include "cm_qp.h"

/* The device's RDMA READ and atomic depths (max_qp_rd_atom, max_qp_init_rd_atom): librdmacm's cma_dev limits (one device: asked once). */
static void device_rd_atomic(struct ibv_context *device, uint8_t *responder_resources, uint8_t *initiator_depth)
{
	static uint8_t responder, initiator;
	if (!responder) {
		struct ibv_device_attr attr;
		int ok = device && ibv_query_device(device, &attr) == 0;
		responder = ok && attr.max_qp_rd_atom > 0 ? (uint8_t)(attr.max_qp_rd_atom < 0xfe ? attr.max_qp_rd_atom : 0xfe) : 1;
		initiator = ok && attr.max_qp_init_rd_atom > 0
				    ? (uint8_t)(attr.max_qp_init_rd_atom < 0xfe ? attr.max_qp_init_rd_atom : 0xfe)
				    : 1;
	}
	*responder_resources = responder;
	*initiator_depth = initiator;
}

/*
 * librdmacm's ucma_valid_param, and the REQ's or REP's room for private data: EINVAL for more private data
 * than the CM carries or an explicit depth above the device's (RDMA_MAX_* asks for the device's); else 0,
 * with the device's depths in *responder and *initiator.
 */
static int valid_param(struct cm_id *id, const struct rdma_conn_param *param, uint8_t *responder, uint8_t *initiator)
{
	device_rd_atomic(id->id.verbs, responder, initiator);
	if (param && param->private_data_len > MAX_PRIVATE_DATA)
		return EINVAL;
	if (id->id.ps != RDMA_PS_TCP || !param)
		return id->id.ps == RDMA_PS_TCP && !param && !id->id.qp ? EINVAL : 0;
	if (param->responder_resources != RDMA_MAX_RESP_RES && param->responder_resources > *responder)
		return EINVAL;
	if (param->initiator_depth != RDMA_MAX_INIT_DEPTH && param->initiator_depth > *initiator)
		return EINVAL;
	return 0;
}

static void conn_params(Pagewire__Verbs__V1__CmConnParams *p, struct cm_id *id, const struct rdma_conn_param *param)
{
	p->responder_resources = id->responder_resources;
	p->initiator_depth = id->initiator_depth;
	if (param) {
		p->private_data.data = (uint8_t *)param->private_data;
		p->private_data.len = param->private_data ? param->private_data_len : 0;
		p->retry_count = param->retry_count;
		p->rnr_retry_count = param->rnr_retry_count;
		p->srq = param->srq;
		p->flow_control = param->flow_control;
		p->qpn = param->qp_num;
	}
	if (id->id.qp) {
		p->qpn = id->id.qp->qp_num;
		p->srq = id->id.qp->srq != NULL;
	}
	p->psn = id->psn;
}

EXPORT int rdma_connect(struct rdma_cm_id *cm_id, struct rdma_conn_param *conn_param)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	uint8_t responder, initiator;
	int invalid = valid_param(id, conn_param, &responder, &initiator);
	if (invalid)
		return cm_fail(invalid);
	id->initiator_depth = conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH ? conn_param->initiator_depth : initiator;
	id->responder_resources =
		conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES ? conn_param->responder_resources : responder;
	id->psn = cm_random_psn();
	if (conn_param) {
		/* 3-bit fields of the REQ: the kernel's rdma_connect takes at most 7 of each */
		id->retry_count = conn_param->retry_count < 7 ? conn_param->retry_count : 7;
		id->rnr_retry_count = conn_param->rnr_retry_count < 7 ? conn_param->rnr_retry_count : 7;
	} else {
		id->retry_count = 7;
		id->rnr_retry_count = 7;
	}
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	Pagewire__Verbs__V1__CmConnParams p = PAGEWIRE__VERBS__V1__CM_CONN_PARAMS__INIT;
	conn_params(&p, id, conn_param);
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_CONNECT;
	req.connect = &p;
	int e = cm_call(id, &req, NULL);
	if (e)
		return cm_fail(e);
	return id->sync ? cm_complete(id) : 0;
}

EXPORT int rdma_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *conn_param)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	/* what this side's RTR and RTS take: its resources as accepted (RDMA_MAX_*: the request's, within the device's) */
	uint8_t responder, initiator;
	int invalid = valid_param(id, conn_param, &responder, &initiator);
	if (invalid)
		return cm_fail(invalid);
	if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH)
		id->initiator_depth = id->initiator_depth < initiator ? id->initiator_depth : initiator;
	else
		id->initiator_depth = conn_param->initiator_depth;
	if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES)
		id->responder_resources = id->responder_resources < responder ? id->responder_resources : responder;
	else
		id->responder_resources = conn_param->responder_resources;
	id->psn = cm_random_psn();
	if (conn_param)
		id->rnr_retry_count = conn_param->rnr_retry_count < 7 ? conn_param->rnr_retry_count : 7;
	if (id->id.qp && id->id.qp_type != IBV_QPT_UD) {
		if (cm_qp_to_rtr(id) || cm_qp_to_rts(id)) {
			int e = errno ? errno : EINVAL;
			cm_qp_to_error(id);
			rdma_reject(cm_id, NULL, 0);
			return cm_fail(e);
		}
	}
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	Pagewire__Verbs__V1__CmConnParams p = PAGEWIRE__VERBS__V1__CM_CONN_PARAMS__INIT;
	conn_params(&p, id, conn_param);
	if (id->id.qp_type == IBV_QPT_UD)
		p.qkey = id->id.ps == RDMA_PS_IPOIB ? 0 : RDMA_UDP_QKEY;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_ACCEPT;
	req.accept = &p;
	int e = cm_call(id, &req, NULL);
	if (e) {
		cm_qp_to_error(id);
		return cm_fail(e);
	}
	if (id->sync && id->id.qp_type != IBV_QPT_UD)
		return cm_complete(id);
	if (id->sync && id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	return 0;
}

EXPORT int rdma_reject(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_REJECT;
	req.reject.data = (uint8_t *)private_data;
	req.reject.len = private_data ? private_data_len : 0;
	int e = cm_call(id, &req, NULL);
	return e ? cm_fail(e) : 0;
}

EXPORT int rdma_reject_ece(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len)
{
	return rdma_reject(cm_id, private_data, private_data_len);
}

EXPORT int rdma_establish(struct rdma_cm_id *cm_id)
{
	int e = cm_establish((struct cm_id *)cm_id);
	return e ? cm_fail(e) : 0;
}

EXPORT int rdma_notify(struct rdma_cm_id *cm_id, enum ibv_event_type event)
{
	(void)cm_id;
	(void)event;
	return 0; /* the node learns of communication from the CM's own exchange */
}

EXPORT int rdma_disconnect(struct rdma_cm_id *cm_id)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	cm_qp_to_error(id);
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_DISCONNECT;
	req.disconnect = 1;
	int e = cm_call(id, &req, NULL);
	return e ? cm_fail(e) : 0;
}

/*
 * As librdmacm: the node moves the id (and its events not yet read) to the new channel; the event a synchronous
 * id holds is acknowledged and its private channel goes; then the call waits for the events already read on the
 * old channel to be acknowledged, so that none is handled there after it returns.
 */
EXPORT int rdma_migrate_id(struct rdma_cm_id *cm_id, struct rdma_event_channel *channel)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (id->sync && !channel)
		return cm_fail(EINVAL);
	int sync = !channel;
	if (sync && !(channel = rdma_create_event_channel()))
		return -1;
	struct cm_channel *to = (struct cm_channel *)channel;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	Pagewire__Verbs__V1__CmChannelRef ref = PAGEWIRE__VERBS__V1__CM_CHANNEL_REF__INIT;
	ref.channel_id = to->id;
	ref.channel_key = to->key;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_MIGRATE;
	req.migrate = &ref;
	int e = cm_call(id, &req, NULL);
	if (e) {
		if (sync)
			rdma_destroy_event_channel(channel);
		return cm_fail(e);
	}
	if (id->sync) {
		if (id->id.event) {
			rdma_ack_cm_event(id->id.event);
			id->id.event = NULL;
		}
		rdma_destroy_event_channel(id->id.channel);
	}
	pthread_mutex_lock(&id->lock);
	id->sync = sync;
	id->id.channel = channel;
	pthread_mutex_unlock(&id->lock);
	cm_wait_for_acks(id);
	return 0;
}
