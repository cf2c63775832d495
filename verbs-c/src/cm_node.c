/*
 * The connection manager's base: the node it serves (one control connection, the first verbs device
 * and its protection domain), the event channels (streams from the node), the ids by the node's numbers,
 * and the calls an id makes. Every other file of the connection manager builds on this one; cm.c holds
 * the id's own API, cm_events.c the events, cm_connect.c connecting, cm_multicast.c groups.
 *
 * The library serves the first node PAGEWIRE_NODE names (the first verbs device): its ids bind to and
 * resolve from that node's address, and their verbs context is that device's.
 */
#include "cm_objects.h"
#include "cm_node.h"
#include "wire.h"

/* ---- the node: one control connection, the first device, and the ids by number ---- */

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pw_conn control = {.fd = -1};
static struct ibv_context *device_context;
/* The device's protection domain every id starts with (rdma_cm_id.pd), as librdmacm allocates one per device. */
static struct ibv_pd *device_pd;
static char socket_path[512];
static struct pw_table ids; /* struct cm_id, under cm_lock */

int cm_node_open(void)
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

int cm_ids_add(struct cm_id *id)
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

void cm_ids_remove(struct cm_id *id)
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
	int e = cm_node_open();
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

void cm_channel_free(struct cm_channel *chan)
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
		cm_channel_free(chan);
}

/* ---- ids ---- */

struct cm_id *cm_id_new(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps, enum ibv_qp_type qp_type)
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

/* Frees what an id's joins left (rdma_destroy_id). */
static void free_groups(struct cm_id *id)
{
	struct cm_group *g = id->groups;
	id->groups = NULL;
	while (g) {
		struct cm_group *next = g->next;
		free(g);
		g = next;
	}
}

void cm_id_free(struct cm_id *id)
{
	pthread_mutex_destroy(&id->lock);
	pthread_cond_destroy(&id->cond);
	free(id->listen_attr);
	free_groups(id);
	free(id);
}

/* An id made by a connection request, as its listen's: channel, context, device, port space, addresses. */
struct cm_id *cm_request_id(struct cm_id *listen, uint32_t number)
{
	struct cm_id *child = cm_id_new(listen->id.channel, listen->id.context, listen->id.ps, listen->id.qp_type);
	if (!child)
		return NULL;
	child->number = number;
	child->id.pd = listen->id.pd;
	if (cm_ids_add(child)) {
		cm_id_free(child);
		return NULL;
	}
	return child;
}

/* A reader enters the channel (rdma_get_cm_event): the channel is not freed while it reads. */
void cm_channel_reader_enters(struct cm_channel *chan)
{
	pthread_mutex_lock(&cm_lock);
	chan->readers++;
	pthread_mutex_unlock(&cm_lock);
}

/* Whether the channel was destroyed while this thread read it. */
int cm_channel_destroyed(struct cm_channel *chan)
{
	pthread_mutex_lock(&cm_lock);
	int destroyed = chan->destroyed;
	pthread_mutex_unlock(&cm_lock);
	return destroyed;
}

/* A reader leaves the channel; the last one out of a destroyed channel frees it. */
void cm_channel_reader_leaves(struct cm_channel *chan)
{
	pthread_mutex_lock(&cm_lock);
	int last = --chan->readers == 0 && chan->destroyed;
	pthread_mutex_unlock(&cm_lock);
	if (last)
		cm_channel_free(chan);
}

/* The id is going (rdma_destroy_id): events for it are no longer the program's. */
void cm_id_destroyed(struct cm_id *id)
{
	pthread_mutex_lock(&cm_lock);
	id->destroyed = 1;
	pthread_mutex_unlock(&cm_lock);
}

/* ESTABLISH: the id's connection is up (rdma_establish, and a CONNECT_RESPONSE whose pair the library connected). */
int cm_establish(struct cm_id *id)
{
	Pagewire__Verbs__V1__CmCallRequest req = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__INIT;
	req.operation_case = PAGEWIRE__VERBS__V1__CM_CALL_REQUEST__OPERATION_ESTABLISH;
	req.establish = 1;
	return cm_call(id, &req, NULL);
}

/* ---- devices ---- */

EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (cm_node_open()) {
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
