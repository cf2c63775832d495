/*
 * The connection manager's events as a program sees them: the node's CmIdEvent turned into librdmacm's
 * rdma_cm_event, with what librdmacm does on the way (a request's new id, the peer's queue pair taken,
 * a CONNECT_RESPONSE that connects the id's pair and becomes ESTABLISHED, DISCONNECTED moving it to ERROR).
 * cm.c reads the channel's stream and hands each event here.
 */
#include "cm_objects.h"
#include "cm_events.h"
#include "cm_node.h"
#include "cm_multicast.h"
#include "cm_qp.h"
#include "wire.h"

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
static struct cm_event *cm_event_convert(const Pagewire__Verbs__V1__CmIdEvent *e)
{
	struct cm_event *evt = calloc(1, sizeof(*evt));
	if (!evt)
		return NULL;
	struct rdma_cm_event *event = &evt->event;
	event->event = (enum rdma_cm_event_type)e->type;
	event->status = e->status;
	struct cm_id *id;
	if (e->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct cm_id *listen = cm_ids_find(e->listen_id);
		if (!listen || !(id = cm_request_id(listen, e->id))) {
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
		id = cm_ids_find(e->id);
		if (!id) {
			free(evt);
			return NULL;
		}
		evt->counted = id;
	}
	event->id = &id->id;
	cm_set_route(id, e->src, e->dst);
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
			/* each step returns 0 or an errno value, as ibv_modify_qp does */
			int failed = cm_qp_to_rtr(id);
			if (!failed)
				failed = cm_qp_to_rts(id);
			if (!failed)
				failed = cm_establish(id);
			if (failed) {
				event->status = -(failed > 0 ? failed : EINVAL);
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
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		cm_multicast_joined(id, e->dst, event);
		break;
	default:
		break;
	}
	return evt;
}

/* Waits until every event reported for the id was acknowledged, as librdmacm's destroy and migrate do. */
void cm_wait_for_acks(struct cm_id *id)
{
	pthread_mutex_lock(&id->lock);
	while (id->events_completed < id->events_reported)
		pthread_cond_wait(&id->cond, &id->lock);
	pthread_mutex_unlock(&id->lock);
}

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

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **out)
{
	struct cm_channel *chan = (struct cm_channel *)channel;
	if (!chan || !out)
		return cm_fail(EINVAL);
	cm_channel_reader_enters(chan);
	pthread_mutex_lock(&chan->read_lock);
	for (;;) {
		int flags = fcntl(chan->channel.fd, F_GETFL);
		if (flags >= 0 && (flags & O_NONBLOCK)) {
			struct pollfd pfd = {.fd = chan->channel.fd, .events = POLLIN};
			if (poll(&pfd, 1, 0) == 0) {
				pthread_mutex_unlock(&chan->read_lock);
				cm_channel_reader_leaves(chan);
				return cm_fail(EAGAIN);
			}
		}
		Pagewire__Verbs__V1__CmEvent *msg = NULL;
		int e = pw_stream_next(&chan->conn, &pagewire__verbs__v1__cm_event__descriptor, (ProtobufCMessage **)&msg);
		if (e) {
			pthread_mutex_unlock(&chan->read_lock);
			if (!cm_channel_destroyed(chan))
				pw_log(PW_WARN, "rdma_get_cm_event: the node's event stream ended (%s)", strerror(e));
			cm_channel_reader_leaves(chan);
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
		cm_channel_reader_leaves(chan);
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
