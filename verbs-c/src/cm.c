/*
 * Pagewire's librdmacm, an id's own API (rdma_cma.h): creating and destroying ids, binding and resolving
 * addresses and routes, listening, options and ports, with the node as the rdma_cm service. Every
 * operation on an id is a CmCall that answers with librdmacm's errno (cm_node.c); a synchronous id waits
 * for the event its operation leads to (cm_events.c).
 */
#include "cm_objects.h"
#include "cm_node.h"
#include "cm_events.h"
#include "cm_qp.h"

static enum ibv_qp_type qp_type_of(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out, void *context, enum rdma_port_space ps)
{
	int e = cm_node_open();
	if (e)
		return cm_fail(e);
	int sync = !channel;
	if (sync && !(channel = rdma_create_event_channel()))
		return -1;
	struct cm_id *id = cm_id_new(channel, context, ps, qp_type_of(ps));
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
		e = cm_ids_add(id);
	}
	if (e) {
		if (sync)
			rdma_destroy_event_channel(channel);
		cm_id_free(id);
		return cm_fail(e);
	}
	*out = &id->id;
	return 0;
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
	cm_id_destroyed(id);
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	cm_wait_for_acks(id);
	cm_ids_remove(id);
	cm_destroy_cqs(id);
	if (id->sync)
		rdma_destroy_event_channel(id->id.channel);
	cm_id_free(id);
	return 0;
}

/* ---- address and route ---- */

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

/* ---- options, ports ---- */

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
