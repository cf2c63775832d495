/*
 * The connection manager's events as a program sees them: the node's CmIdEvent turned into librdmacm's
 * rdma_cm_event, with what librdmacm does on the way (a request's new id, the peer's queue pair taken,
 * a CONNECT_RESPONSE that connects the id's pair and becomes ESTABLISHED, DISCONNECTED moving it to ERROR).
 * cm.c reads the channel's stream and hands each event here.
 */
#include "cm_objects.h"
#include "cm.h"
#include "cm_multicast.h"
#include "cm_qp.h"

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
struct cm_event *cm_event_convert(const Pagewire__Verbs__V1__CmIdEvent *e)
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
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		cm_multicast_joined(id, e->dst, event);
		break;
	default:
		break;
	}
	return evt;
}
