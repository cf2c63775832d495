/*
 * Pagewire's librdmacm: the connection manager's API (rdma_cma.h) with the node as the rdma_cm
 * service. An event channel is a stream from the node (its fd is the stream's socket, so a program
 * polls it as it polls /dev/infiniband/rdma_cm); every operation on an id is a CmCall that answers with
 * librdmacm's errno; the events the node streams carry what the library needs to move an id's queue
 * pair through INIT, RTR and RTS itself, as librdmacm does with the kernel's rdma_init_qp_attr.
 *
 * The library serves the first node PAGEWIRE_NODE names (the first verbs device): its ids bind to and
 * resolve from that node's address, and their verbs context is that device's.
 */
#include "cm_objects.h"

/* ---- the node: one control connection, the first device, and the ids by number ---- */

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pw_conn control = {.fd = -1};
static struct ibv_context *device_context;
/* The device's protection domain every id starts with (rdma_cm_id.pd), as librdmacm allocates one per device. */
static struct ibv_pd *device_pd;
static char socket_path[512];
static struct pw_table ids; /* struct cm_id, under cm_lock */

static int node_open(void)
{
	int e = 0;
	pthread_mutex_lock(&cm_lock);
	if (control.fd < 0) {
		int n = 0;
		struct ibv_device **list = ibv_get_device_list(&n);
		if (!list || n == 0) {
			pw_log(PW_ERROR, "rdma_cm: no Pagewire device (set PAGEWIRE_NODE to the node this program uses)");
			e = ENODEV;
		} else {
			snprintf(socket_path, sizeof(socket_path), "%s", list[0]->dev_path);
			if (!device_context)
				device_context = ibv_open_device(list[0]);
			if (device_context && !device_pd)
				device_pd = ibv_alloc_pd(device_context);
			if (!device_context || !device_pd)
				e = errno ? errno : ENODEV;
			else
				e = pw_conn_open(&control, socket_path);
		}
		if (list)
			ibv_free_device_list(list);
	}
	pthread_mutex_unlock(&cm_lock);
	return e;
}

static int ids_add(struct cm_id *id)
{
	pthread_mutex_lock(&cm_lock);
	int e = pw_table_add(&ids, id, 64);
	pthread_mutex_unlock(&cm_lock);
	return e;
}

static struct cm_id *ids_find(uint32_t number)
{
	struct cm_id *found = NULL;
	pthread_mutex_lock(&cm_lock);
	for (int i = 0; i < ids.count && !found; i++) {
		struct cm_id *id = ids.items[i];
		if (id->number == number && !id->destroyed)
			found = id;
	}
	pthread_mutex_unlock(&cm_lock);
	return found;
}

static void ids_remove(struct cm_id *id)
{
	pthread_mutex_lock(&cm_lock);
	pw_table_remove(&ids, id);
	pthread_mutex_unlock(&cm_lock);
}

/* ---- addresses ---- */

static void address_of(const struct sockaddr *sa, ProtobufCBinaryData *ip, uint32_t *port)
{
	ip->len = 0;
	ip->data = NULL;
	*port = 0;
	if (!sa)
		return;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		ip->data = (uint8_t *)&in->sin_addr;
		ip->len = 4;
		*port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		ip->data = (uint8_t *)&in6->sin6_addr;
		ip->len = 16;
		*port = ntohs(in6->sin6_port);
	}
}

static void sockaddr_of(const Pagewire__Verbs__V1__CmAddress *a, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (!a)
		return;
	if (a->ip.len == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)out;
		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, a->ip.data, 4);
		in->sin_port = htons((uint16_t)a->port);
	} else if (a->ip.len == 16) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, a->ip.data, 16);
		in6->sin6_port = htons((uint16_t)a->port);
	}
}

static void set_route(struct cm_id *id, const Pagewire__Verbs__V1__CmAddress *src, const Pagewire__Verbs__V1__CmAddress *dst)
{
	if (src && src->ip.len)
		sockaddr_of(src, &id->id.route.addr.src_storage);
	if (dst && dst->ip.len)
		sockaddr_of(dst, &id->id.route.addr.dst_storage);
}

/* ---- calls ---- */

/* One operation on an id; fills *reply when asked. Returns 0, or the errno librdmacm returns (logged). */
static int cm_call(struct cm_id *id, Pagewire__Verbs__V1__CmCallRequest *req, Pagewire__Verbs__V1__CmCallResponse **reply_out)
{
	struct cm_channel *chan = (struct cm_channel *)id->id.channel;
	Pagewire__Verbs__V1__CmChannelRef ref = PAGEWIRE__VERBS__V1__CM_CHANNEL_REF__INIT;
	ref.channel_id = chan->id;
	ref.channel_key = chan->key;
	req->channel = &ref;
	req->id = id->number;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	int e = pw_call(&control, CM_CALL, &req->base, &pagewire__verbs__v1__cm_call_response__descriptor, (ProtobufCMessage **)&reply);
	if (e)
		return e;
	if (reply->error_number) {
		e = reply->error_number;
		/* Probing is normal: middleware binds every address of the host to find its RDMA devices. */
		int probe = e == EADDRINUSE || e == EADDRNOTAVAIL || e == ENODEV;
		pw_log(probe ? PW_INFO : PW_WARN, "rdma_cm: %s", reply->error);
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		return e;
	}
	if (reply_out)
		*reply_out = reply;
	else
		protobuf_c_message_free_unpacked(&reply->base, NULL);
	return 0;
}

/* ---- event channels ---- */

EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	int e = node_open();
	if (e) {
		errno = e;
		return NULL;
	}
	struct cm_channel *chan = calloc(1, sizeof(*chan));
	if (!chan) {
		errno = ENOMEM;
		return NULL;
	}
	e = pw_conn_open(&chan->conn, socket_path);
	if (!e)
		e = pw_stream_open(&chan->conn, "CmChannel");
	Pagewire__Verbs__V1__CmEvent *first = NULL;
	if (!e)
		e = pw_stream_next(&chan->conn, &pagewire__verbs__v1__cm_event__descriptor, (ProtobufCMessage **)&first);
	if (!e && (first->body_case != PAGEWIRE__VERBS__V1__CM_EVENT__BODY_OPENED || !first->opened->channel))
		e = EPROTO;
	if (e) {
		if (first)
			protobuf_c_message_free_unpacked(&first->base, NULL);
		if (chan->conn.fd >= 0)
			pw_conn_close(&chan->conn);
		free(chan);
		errno = e;
		return NULL;
	}
	chan->id = first->opened->channel->channel_id;
	chan->key = first->opened->channel->channel_key;
	protobuf_c_message_free_unpacked(&first->base, NULL);
	chan->channel.fd = chan->conn.fd;
	pthread_mutex_init(&chan->read_lock, NULL);
	return &chan->channel;
}

static void channel_free(struct cm_channel *chan)
{
	close(chan->conn.fd);
	pthread_mutex_destroy(&chan->read_lock);
	free(chan);
}

/*
 * Closes the channel. A thread still blocked in rdma_get_cm_event on it (rping's event thread, which
 * its program never joins) stays blocked, as a read of the kernel's rdma_cm file does after close(2):
 * the channel's ids are gone, so no event wakes it, and its socket is closed when it leaves or the
 * process ends.
 */
EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *chan = (struct cm_channel *)channel;
	if (!chan)
		return;
	pthread_mutex_lock(&cm_lock);
	int reading = chan->readers > 0;
	if (reading)
		chan->destroyed = 1;
	pthread_mutex_unlock(&cm_lock);
	if (!reading)
		channel_free(chan);
}

/* ---- ids ---- */

static struct cm_id *id_new(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *id = calloc(1, sizeof(*id));
	if (!id)
		return NULL;
	id->id.verbs = device_context;
	id->id.pd = device_pd;
	id->id.channel = channel;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qp_type;
	id->id.port_num = 1;
	id->ack_timeout = DEFAULT_ACK_TIMEOUT;
	pthread_mutex_init(&id->lock, NULL);
	pthread_cond_init(&id->cond, NULL);
	return id;
}

static void id_free(struct cm_id *id)
{
	pthread_mutex_destroy(&id->lock);
	pthread_cond_destroy(&id->cond);
	free(id->listen_attr);
	cm_free_groups(id);
	free(id);
}

static struct cm_group *group_of(struct cm_id *id, const uint8_t *ip, size_t len);

static enum ibv_qp_type qp_type_of(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out, void *context, enum rdma_port_space ps)
{
	int e = node_open();
	if (e)
		return cm_fail(e);
	int sync = !channel;
	if (sync && !(channel = rdma_create_event_channel()))
		return -1;
	struct cm_id *id = id_new(channel, context, ps, qp_type_of(ps));
	if (!id) {
		if (sync)
			rdma_destroy_event_channel(channel);
		return cm_fail(ENOMEM);
	}
	id->sync = sync;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	Pagewire__Verbs__V1__CmCreateId create = PAGEWIRE__VERBS__V1__CM_CREATE_ID__INIT;
	create.port_space = ps;
	create.qp_type = id->id.qp_type;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_CREATE_ID;
	req.create_id = &create;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	e = cm_call(id, &req, &reply);
	if (!e) {
		id->number = reply->id;
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		e = ids_add(id);
	}
	if (e) {
		if (sync)
			rdma_destroy_event_channel(channel);
		id_free(id);
		return cm_fail(e);
	}
	*out = &id->id;
	return 0;
}

/* Waits until every event reported for the id was acknowledged, as librdmacm's destroy and migrate do. */
static void wait_for_acks(struct cm_id *id)
{
	pthread_mutex_lock(&id->lock);
	while (id->events_completed < id->events_reported)
		pthread_cond_wait(&id->cond, &id->lock);
	pthread_mutex_unlock(&id->lock);
}

EXPORT int rdma_destroy_id(struct rdma_cm_id *cm_id)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_DESTROY;
	req.destroy = 1;
	int e = cm_call(id, &req, NULL);
	if (e && e != ENOENT)
		return cm_fail(e);
	pthread_mutex_lock(&cm_lock);
	id->destroyed = 1;
	pthread_mutex_unlock(&cm_lock);
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	wait_for_acks(id);
	ids_remove(id);
	cm_destroy_cqs(id);
	if (id->sync)
		rdma_destroy_event_channel(id->id.channel);
	id_free(id);
	return 0;
}

/* ---- address and route ---- */

/*
 * Reads the next event of a synchronous id's own channel (the one the operation just started leads
 * to) into id->event, acknowledging the one before, as librdmacm's ucma_complete does.
 */
static int complete(struct cm_id *id)
{
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (rdma_get_cm_event(id->id.channel, &id->id.event))
		return -1;
	int status = id->id.event->status;
	if (status)
		return cm_fail(id->id.event->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : status < 0 ? -status : status);
	return 0;
}

EXPORT int rdma_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6 && addr->sa_family != AF_IB))
		return cm_fail(EINVAL);
	if (addr->sa_family == AF_IB)
		return cm_fail(EAFNOSUPPORT);
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	Pagewire__Verbs__V1__CmAddress a = PAGEWIRE__VERBS__V1__CM_ADDRESS__INIT;
	address_of(addr, &a.ip, &a.port);
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_BIND;
	req.bind = &a;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	int e = cm_call(id, &req, &reply);
	if (e)
		return cm_fail(e);
	set_route(id, reply->src, NULL);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	return 0;
}

EXPORT int rdma_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src, struct sockaddr *dst, int timeout_ms)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return cm_fail(dst && dst->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	Pagewire__Verbs__V1__CmResolveAddress r = PAGEWIRE__VERBS__V1__CM_RESOLVE_ADDRESS__INIT;
	Pagewire__Verbs__V1__CmAddress s = PAGEWIRE__VERBS__V1__CM_ADDRESS__INIT, d = PAGEWIRE__VERBS__V1__CM_ADDRESS__INIT;
	address_of(src, &s.ip, &s.port);
	address_of(dst, &d.ip, &d.port);
	r.src = &s;
	r.dst = &d;
	r.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 2000;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_RESOLVE_ADDRESS;
	req.resolve_address = &r;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	int e = cm_call(id, &req, &reply);
	if (e)
		return cm_fail(e);
	set_route(id, reply->src, reply->dst);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	return id->sync ? complete(id) : 0;
}

EXPORT int rdma_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_RESOLVE_ROUTE_TIMEOUT_MS;
	req.resolve_route_timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 2000;
	int e = cm_call(id, &req, NULL);
	if (e)
		return cm_fail(e);
	return id->sync ? complete(id) : 0;
}

EXPORT int rdma_listen(struct rdma_cm_id *cm_id, int backlog)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_LISTEN;
	req.listen = backlog > 0 ? (uint32_t)backlog : 0;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	int e = cm_call(id, &req, &reply);
	if (e)
		return cm_fail(e);
	set_route(id, reply->src, NULL);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	return 0;
}

/* ---- connecting ---- */

/* The device's RDMA READ and atomic depths (max_qp_rd_atom, max_qp_init_rd_atom): librdmacm's cma_dev limits. */
static void device_rd_atomic(uint8_t *responder_resources, uint8_t *initiator_depth)
{
	static uint8_t responder, initiator;
	if (!responder) {
		struct ibv_device_attr attr;
		int ok = device_context && ibv_query_device(device_context, &attr) == 0;
		responder = ok && attr.max_qp_rd_atom > 0 ? (uint8_t)(attr.max_qp_rd_atom < 0xfe ? attr.max_qp_rd_atom : 0xfe) : 1;
		initiator = ok && attr.max_qp_init_rd_atom > 0
				    ? (uint8_t)(attr.max_qp_init_rd_atom < 0xfe ? attr.max_qp_init_rd_atom : 0xfe)
				    : 1;
	}
	*responder_resources = responder;
	*initiator_depth = initiator;
}

/* librdmacm's ucma_valid_param: an explicit depth above the device's is EINVAL (RDMA_MAX_* asks for the device's). */
static int valid_depths(struct cm_id *id, const struct rdma_conn_param *param)
{
	if (id->id.ps != RDMA_PS_TCP || !param)
		return id->id.ps == RDMA_PS_TCP && !param && !id->id.qp ? EINVAL : 0;
	uint8_t responder, initiator;
	device_rd_atomic(&responder, &initiator);
	if (param->responder_resources != RDMA_MAX_RESP_RES && param->responder_resources > responder)
		return EINVAL;
	if (param->initiator_depth != RDMA_MAX_INIT_DEPTH && param->initiator_depth > initiator)
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
	if (conn_param && conn_param->private_data_len > MAX_PRIVATE_DATA)
		return cm_fail(EINVAL);
	int invalid = valid_depths(id, conn_param);
	if (invalid)
		return cm_fail(invalid);
	uint8_t responder, initiator;
	device_rd_atomic(&responder, &initiator);
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
	return id->sync ? complete(id) : 0;
}

EXPORT int rdma_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *conn_param)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (conn_param && conn_param->private_data_len > MAX_PRIVATE_DATA)
		return cm_fail(EINVAL);
	int invalid = valid_depths(id, conn_param);
	if (invalid)
		return cm_fail(invalid);
	/* what this side's RTR and RTS take: its resources as accepted (RDMA_MAX_*: the request's, within the device's) */
	uint8_t responder, initiator;
	device_rd_atomic(&responder, &initiator);
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
		return complete(id);
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
	struct cm_id *id = (struct cm_id *)cm_id;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_ESTABLISH;
	req.establish = 1;
	int e = cm_call(id, &req, NULL);
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
	wait_for_acks(id);
	return 0;
}

/* ---- events ---- */

static const char *event_names[] = {
	"RDMA_CM_EVENT_ADDR_RESOLVED",	 "RDMA_CM_EVENT_ADDR_ERROR",	   "RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
	"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE", "RDMA_CM_EVENT_CONNECT_ERROR",  "RDMA_CM_EVENT_UNREACHABLE",
	"RDMA_CM_EVENT_REJECTED",	 "RDMA_CM_EVENT_ESTABLISHED",	   "RDMA_CM_EVENT_DISCONNECTED",   "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN",	 "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",	   "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	return (unsigned)event < sizeof(event_names) / sizeof(event_names[0]) ? event_names[event] : "UNKNOWN EVENT";
}

/* An id made by a connection request, as its listen's: channel, context, device, port space, addresses. */
static struct cm_id *request_id(struct cm_id *listen, const Pagewire__Verbs__V1__CmIdEvent *e)
{
	struct cm_id *child = id_new(listen->id.channel, listen->id.context, listen->id.ps, listen->id.qp_type);
	if (!child)
		return NULL;
	child->number = e->id;
	child->id.pd = listen->id.pd;
	if (ids_add(child)) {
		id_free(child);
		return NULL;
	}
	return child;
}

static void take_peer(struct cm_id *id, const Pagewire__Verbs__V1__CmIdEvent *e)
{
	id->peer_lid = e->peer_lid;
	if (e->params) {
		id->peer_qpn = e->params->qpn;
		id->peer_psn = e->params->psn;
		id->peer_qkey = e->params->qkey;
	}
}

/*
 * Turns the node's event into the program's: finds (or, for a request, makes) its id, and does what
 * librdmacm does on the way: a CONNECT_RESPONSE for an id with a queue pair connects the pair and
 * becomes ESTABLISHED; DISCONNECTED moves the pair to ERROR. Returns NULL for an event the program
 * does not see (its id is gone).
 */
static struct cm_event *convert(const Pagewire__Verbs__V1__CmIdEvent *e)
{
	struct cm_event *evt = calloc(1, sizeof(*evt));
	if (!evt)
		return NULL;
	struct rdma_cm_event *event = &evt->event;
	event->event = (enum rdma_cm_event_type)e->type;
	event->status = e->status;
	struct cm_id *id;
	if (e->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct cm_id *listen = ids_find(e->listen_id);
		if (!listen || !(id = request_id(listen, e))) {
			free(evt);
			return NULL;
		}
		event->listen_id = &listen->id;
		evt->counted = listen;
		take_peer(id, e);
		if (e->params) {
			id->responder_resources = (uint8_t)e->params->initiator_depth;
			id->initiator_depth = (uint8_t)e->params->responder_resources;
			id->retry_count = (uint8_t)(e->params->retry_count < 7 ? e->params->retry_count : 7);
			id->rnr_retry_count = (uint8_t)(e->params->rnr_retry_count < 7 ? e->params->rnr_retry_count : 7);
		}
	} else {
		id = ids_find(e->id);
		if (!id) {
			free(evt);
			return NULL;
		}
		evt->counted = id;
	}
	event->id = &id->id;
	set_route(id, e->src, e->dst);
	if (e->params && e->params->private_data.len) {
		size_t n =
			e->params->private_data.len < sizeof(evt->private_data) ? e->params->private_data.len : sizeof(evt->private_data);
		memcpy(evt->private_data, e->params->private_data.data, n);
		if (id->id.qp_type == IBV_QPT_UD) {
			event->param.ud.private_data = evt->private_data;
			event->param.ud.private_data_len = (uint8_t)n;
		} else {
			event->param.conn.private_data = evt->private_data;
			event->param.conn.private_data_len = (uint8_t)n;
		}
	}
	if (e->params && id->id.qp_type != IBV_QPT_UD) {
		event->param.conn.responder_resources = (uint8_t)e->params->responder_resources;
		event->param.conn.initiator_depth = (uint8_t)e->params->initiator_depth;
		event->param.conn.flow_control = (uint8_t)e->params->flow_control;
		event->param.conn.retry_count = (uint8_t)e->params->retry_count;
		event->param.conn.rnr_retry_count = (uint8_t)e->params->rnr_retry_count;
		event->param.conn.srq = (uint8_t)e->params->srq;
		event->param.conn.qp_num = e->params->qpn;
	}
	switch (event->event) {
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		take_peer(id, e);
		if (id->id.qp) {
			if (cm_qp_to_rtr(id) || cm_qp_to_rts(id) || rdma_establish(&id->id)) {
				event->status = -(errno ? errno : EINVAL);
				event->event = RDMA_CM_EVENT_CONNECT_ERROR;
				cm_qp_to_error(id);
			} else {
				event->event = RDMA_CM_EVENT_ESTABLISHED;
			}
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (id->id.qp_type == IBV_QPT_UD) {
			take_peer(id, e);
			event->param.ud.qp_num = id->peer_qpn;
			event->param.ud.qkey = id->peer_qkey;
			event->param.ud.ah_attr.dlid = (uint16_t)id->peer_lid;
			event->param.ud.ah_attr.port_num = 1;
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		cm_qp_to_error(id);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN: {
		pthread_mutex_lock(&id->lock);
		struct cm_group *g = e->dst ? group_of(id, e->dst->ip.data, e->dst->ip.len) : NULL;
		if (g) {
			event->param.ud.private_data = g->context;
			event->param.ud.ah_attr.dlid = g->lid;
			event->param.ud.ah_attr.is_global = 1;
			event->param.ud.ah_attr.grh.dgid = g->mgid;
			event->param.ud.ah_attr.grh.hop_limit = 0xff;
			event->param.ud.ah_attr.port_num = 1;
			event->param.ud.qp_num = 0xffffff;
			event->param.ud.qkey = id->id.ps == RDMA_PS_IPOIB ? 0 : RDMA_UDP_QKEY;
			if (id->id.qp && !g->attached) {
				if (ibv_attach_mcast(id->id.qp, &g->mgid, g->lid)) {
					event->event = RDMA_CM_EVENT_MULTICAST_ERROR;
					event->status = -EINVAL;
				} else {
					g->attached = 1;
				}
			}
		}
		pthread_mutex_unlock(&id->lock);
		break;
	}
	default:
		break;
	}
	return evt;
}

/* Whether the channel was destroyed while this thread read it. */
static int channel_destroyed(struct cm_channel *chan)
{
	pthread_mutex_lock(&cm_lock);
	int destroyed = chan->destroyed;
	pthread_mutex_unlock(&cm_lock);
	return destroyed;
}

/* A reader leaves the channel; the last one out of a destroyed channel frees it. */
static void reader_leaves(struct cm_channel *chan)
{
	pthread_mutex_lock(&cm_lock);
	int last = --chan->readers == 0 && chan->destroyed;
	pthread_mutex_unlock(&cm_lock);
	if (last)
		channel_free(chan);
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **out)
{
	struct cm_channel *chan = (struct cm_channel *)channel;
	if (!chan || !out)
		return cm_fail(EINVAL);
	pthread_mutex_lock(&cm_lock);
	chan->readers++;
	pthread_mutex_unlock(&cm_lock);
	pthread_mutex_lock(&chan->read_lock);
	for (;;) {
		int flags = fcntl(chan->channel.fd, F_GETFL);
		if (flags >= 0 && (flags & O_NONBLOCK)) {
			struct pollfd pfd = {.fd = chan->channel.fd, .events = POLLIN};
			if (poll(&pfd, 1, 0) == 0) {
				pthread_mutex_unlock(&chan->read_lock);
				reader_leaves(chan);
				return cm_fail(EAGAIN);
			}
		}
		Pagewire__Verbs__V1__CmEvent *msg = NULL;
		int e = pw_stream_next(&chan->conn, &pagewire__verbs__v1__cm_event__descriptor, (ProtobufCMessage **)&msg);
		if (e) {
			pthread_mutex_unlock(&chan->read_lock);
			if (!channel_destroyed(chan))
				pw_log(PW_WARN, "rdma_get_cm_event: the node's event stream ended (%s)", strerror(e));
			reader_leaves(chan);
			return cm_fail(e == ECONNRESET ? ENODEV : e);
		}
		struct cm_event *evt = NULL;
		if (msg->body_case == PAGEWIRE__VERBS__V1__CM_EVENT__BODY_EVENT)
			evt = convert(msg->event);
		protobuf_c_message_free_unpacked(&msg->base, NULL);
		if (!evt)
			continue; /* for an id already destroyed, which the program does not see */
		pthread_mutex_lock(&evt->counted->lock);
		evt->counted->events_reported++;
		pthread_mutex_unlock(&evt->counted->lock);
		pthread_mutex_unlock(&chan->read_lock);
		reader_leaves(chan);
		*out = &evt->event;
		return 0;
	}
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cm_fail(EINVAL);
	struct cm_event *evt = (struct cm_event *)event;
	struct cm_id *counted = evt->counted;
	pthread_mutex_lock(&counted->lock);
	counted->events_completed++;
	pthread_cond_broadcast(&counted->cond);
	pthread_mutex_unlock(&counted->lock);
	free(evt);
	return 0;
}

/* ---- devices, options, ports ---- */

EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (node_open()) {
		if (num_devices)
			*num_devices = 0;
		return NULL;
	}
	struct ibv_context **list = calloc(2, sizeof(*list));
	if (!list)
		return NULL;
	list[0] = device_context;
	if (num_devices)
		*num_devices = 1;
	return list;
}

EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list); /* the contexts stay open for the library's ids, as librdmacm's do */
}

EXPORT int rdma_set_option(struct rdma_cm_id *cm_id, int level, int optname, void *optval, size_t optlen)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	if (!optval)
		return cm_fail(EINVAL);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
		case RDMA_OPTION_ID_REUSEADDR:
		case RDMA_OPTION_ID_AFONLY:
			return optlen >= sizeof(uint8_t) ? 0 : cm_fail(EINVAL);
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				return cm_fail(EINVAL);
			id->ack_timeout = *(uint8_t *)optval;
			return 0;
		default:
			return cm_fail(ENOSYS);
		}
	}
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return 0; /* the path is the fabric's link; the record changes nothing */
	return cm_fail(ENOSYS);
}

static __be16 port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.src_addr);
}

EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.dst_addr);
}

/* ECE (enhanced connection establishment) options: the emulated NIC has none to negotiate. */
EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id;
	return ece ? 0 : cm_fail(EINVAL);
}

EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id;
	if (!ece)
		return cm_fail(EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}

/*
 * Multicast. A group's address maps to the same LID and GID on every node (a hash of the address into
 * 0xC000..0xFFFE; the GID as IPoIB maps an IPv4 group: ff12:401b:ffff::a.b.c.d), so that datagrams any
 * member sends through the LID reach every pair attached to it. The node answers MULTICAST_JOIN at
 * once (the groups are the fabric's: no subnet manager admits members); the library attaches the
 * id's pair when the event comes, as librdmacm does.
 */
static struct cm_group *group_of(struct cm_id *id, const uint8_t *ip, size_t len)
{
	for (struct cm_group *g = id->groups; g; g = g->next)
		if (g->ip_len == len && !memcmp(g->ip, ip, len))
			return g;
	return NULL;
}

static void map_group(struct cm_group *g)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < g->ip_len; i++)
		h = (h ^ g->ip[i]) * 16777619u;
	g->lid = (uint16_t)(0xc000 + h % 0x3fff);
	memset(&g->mgid, 0, sizeof(g->mgid));
	if (g->ip_len == 4) {
		static const uint8_t prefix[6] = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff};
		memcpy(g->mgid.raw, prefix, sizeof(prefix));
		memcpy(g->mgid.raw + 12, g->ip, 4);
	} else {
		memcpy(g->mgid.raw, g->ip, 16);
	}
}

/* Takes the group joined at `ip` off the id's list (under its lock); NULL when there is none. */
static struct cm_group *unlink_group(struct cm_id *id, const uint8_t *ip, size_t len)
{
	struct cm_group *g = NULL;
	pthread_mutex_lock(&id->lock);
	for (struct cm_group **p = &id->groups; *p; p = &(*p)->next)
		if ((*p)->ip_len == len && !memcmp((*p)->ip, ip, len)) {
			g = *p;
			*p = g->next;
			break;
		}
	pthread_mutex_unlock(&id->lock);
	return g;
}

/* Tells the node of a join or a leave of group `g`. */
static int call_multicast(struct cm_id *id, struct cm_group *g, int join)
{
	Pagewire__Verbs__V1__CmMulticast mc = PAGEWIRE__VERBS__V1__CM_MULTICAST__INIT;
	mc.ip.data = g->ip;
	mc.ip.len = g->ip_len;
	mc.lid = g->lid;
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	if (join) {
		req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_JOIN_MULTICAST;
		req.join_multicast = &mc;
	} else {
		req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_LEAVE_MULTICAST;
		req.leave_multicast = &mc;
	}
	return cm_call(id, &req, NULL);
}

/* A group address as the calls take it: false (EINVAL) for no id or no IP address. */
static int group_address(struct cm_id *id, struct sockaddr *addr, ProtobufCBinaryData *ip)
{
	uint32_t port;
	address_of(addr, ip, &port);
	return id && ip->len;
}

EXPORT int rdma_join_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr, void *context)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	ProtobufCBinaryData ip;
	if (!group_address(id, addr, &ip))
		return cm_fail(EINVAL);
	struct cm_group *g = calloc(1, sizeof(*g));
	if (!g)
		return cm_fail(ENOMEM);
	memcpy(g->ip, ip.data, ip.len);
	g->ip_len = ip.len;
	g->context = context;
	map_group(g);
	/* Checked and listed at once (two joins of one group: one is EADDRINUSE), and before the call:
	 * MULTICAST_JOIN may be read on another thread before the call returns. */
	pthread_mutex_lock(&id->lock);
	int joined = group_of(id, ip.data, ip.len) != NULL;
	if (!joined) {
		g->next = id->groups;
		id->groups = g;
	}
	pthread_mutex_unlock(&id->lock);
	if (joined) {
		free(g);
		return cm_fail(EADDRINUSE);
	}
	int e = call_multicast(id, g, 1);
	if (e) {
		free(unlink_group(id, g->ip, g->ip_len));
		return cm_fail(e);
	}
	return 0;
}

EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	if (!mc_join_attr || !(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return cm_fail(EINVAL);
	if ((mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) && mc_join_attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER)
		return cm_fail(EINVAL); /* send-only members need a subnet manager's join states */
	return rdma_join_multicast(id, mc_join_attr->addr, context);
}

EXPORT int rdma_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	struct cm_id *id = (struct cm_id *)cm_id;
	ProtobufCBinaryData ip;
	if (!group_address(id, addr, &ip))
		return cm_fail(EINVAL);
	struct cm_group *g = unlink_group(id, ip.data, ip.len);
	if (!g)
		return cm_fail(EADDRNOTAVAIL);
	if (g->attached && id->id.qp)
		ibv_detach_mcast(id->id.qp, &g->mgid, g->lid);
	int e = call_multicast(id, g, 0);
	free(g);
	return e ? cm_fail(e) : 0;
}

/* Frees what an id's joins left (rdma_destroy_id). */
void cm_free_groups(struct cm_id *id)
{
	struct cm_group *g = id->groups;
	id->groups = NULL;
	while (g) {
		struct cm_group *next = g->next;
		free(g);
		g = next;
	}
}
