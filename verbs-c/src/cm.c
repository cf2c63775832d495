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
#include "cm.h"
#include "cm_multicast.h"
#include "cm_qp.h"

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

struct cm_id *cm_ids_find(uint32_t number)
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

void cm_address_of(const struct sockaddr *sa, ProtobufCBinaryData *ip, uint32_t *port)
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

void cm_set_route(struct cm_id *id, const Pagewire__Verbs__V1__CmAddress *src, const Pagewire__Verbs__V1__CmAddress *dst)
{
	if (src && src->ip.len)
		sockaddr_of(src, &id->id.route.addr.src_storage);
	if (dst && dst->ip.len)
		sockaddr_of(dst, &id->id.route.addr.dst_storage);
}

/* ---- calls ---- */

/* One operation on an id; fills *reply when asked. Returns 0, or the errno librdmacm returns (logged). */
int cm_call(struct cm_id *id, Pagewire__Verbs__V1__CmCallRequest *req, Pagewire__Verbs__V1__CmCallResponse **reply_out)
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

/* An id made by a connection request, as its listen's: channel, context, device, port space, addresses. */
struct cm_id *cm_request_id(struct cm_id *listen, uint32_t number)
{
	struct cm_id *child = id_new(listen->id.channel, listen->id.context, listen->id.ps, listen->id.qp_type);
	if (!child)
		return NULL;
	child->number = number;
	child->id.pd = listen->id.pd;
	if (ids_add(child)) {
		id_free(child);
		return NULL;
	}
	return child;
}

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
void cm_wait_for_acks(struct cm_id *id)
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
	cm_wait_for_acks(id);
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
int cm_complete(struct cm_id *id)
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
	cm_address_of(addr, &a.ip, &a.port);
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_BIND;
	req.bind = &a;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	int e = cm_call(id, &req, &reply);
	if (e)
		return cm_fail(e);
	cm_set_route(id, reply->src, NULL);
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
	cm_address_of(src, &s.ip, &s.port);
	cm_address_of(dst, &d.ip, &d.port);
	r.src = &s;
	r.dst = &d;
	r.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 2000;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_RESOLVE_ADDRESS;
	req.resolve_address = &r;
	Pagewire__Verbs__V1__CmCallResponse *reply = NULL;
	int e = cm_call(id, &req, &reply);
	if (e)
		return cm_fail(e);
	cm_set_route(id, reply->src, reply->dst);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	return id->sync ? cm_complete(id) : 0;
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
	return id->sync ? cm_complete(id) : 0;
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
	cm_set_route(id, reply->src, NULL);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	return 0;
}

/* ---- events ---- */

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
			evt = cm_event_convert(msg->event);
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
