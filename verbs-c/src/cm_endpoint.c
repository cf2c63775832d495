/*
 * The connection manager's endpoint API: rdma_getaddrinfo, rdma_create_ep and rdma_get_request (ids
 * that wait for their own events).
 */
#include "cm_objects.h"

/* ---- endpoints (rdma_getaddrinfo, rdma_create_ep, rdma_get_request) ---- */

static int copy_address(struct sockaddr **to, socklen_t *to_len, const struct sockaddr *from, socklen_t len)
{
	*to = malloc(len);
	if (!*to)
		return ENOMEM;
	memcpy(*to, from, len);
	*to_len = len;
	return 0;
}

/* A name (or a service) through getaddrinfo, into rai's source (passive) or destination, as librdmacm converts it. */
static int resolve_name(const char *node, const char *service, const struct rdma_addrinfo *hints, struct rdma_addrinfo *rai)
{
	struct addrinfo ai_hints = {.ai_socktype = SOCK_STREAM};
	int passive = hints->ai_flags & RAI_PASSIVE;
	if (hints->ai_flags & RAI_NUMERICHOST)
		ai_hints.ai_flags |= AI_NUMERICHOST;
	if (passive)
		ai_hints.ai_flags |= AI_PASSIVE;
	if (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)
		ai_hints.ai_family = hints->ai_family;
	else if (hints->ai_family == AF_IB)
		return EAFNOSUPPORT;
	if (!ai_hints.ai_family)
		ai_hints.ai_family = AF_INET;
	struct addrinfo *ai = NULL;
	int r = getaddrinfo(node, service, &ai_hints, &ai);
	if (r)
		return r == EAI_SYSTEM ? errno : ENOENT;
	rai->ai_flags = hints->ai_flags;
	rai->ai_family = ai->ai_family;
	rai->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	rai->ai_port_space = hints->ai_port_space ? hints->ai_port_space : rai->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
	int e = passive ? copy_address(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen)
			: copy_address(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return e;
}

/*
 * As librdmacm: a node or service is resolved; without either the hints' addresses are the answer (libfabric
 * asks so for the address it already has); the hints' source fills in one the resolution did not give.
 */
EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo no_hints;
	if (!node && !service && !hints)
		return cm_fail(EINVAL);
	if (!hints)
		hints = &no_hints;
	struct rdma_addrinfo *rai = calloc(1, sizeof(*rai));
	if (!rai)
		return cm_fail(ENOMEM);
	int e = 0;
	if (node || service) {
		e = resolve_name(node, service, hints, rai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			e = copy_address(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (!e && !rai->ai_src_len && hints->ai_src_len)
		e = copy_address(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
	if (e) {
		rdma_freeaddrinfo(rai);
		return cm_fail(e);
	}
	*res = rai;
	return 0;
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

EXPORT int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (!out || !res)
		return cm_fail(EINVAL);
	struct rdma_cm_id *cm_id;
	if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	struct cm_id *id = (struct cm_id *)cm_id;
	id->id.qp_type = (enum ibv_qp_type)res->ai_qp_type;
	int failed;
	if (res->ai_flags & RAI_PASSIVE)
		failed = rdma_bind_addr(cm_id, res->ai_src_addr);
	else
		failed = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) || rdma_resolve_route(cm_id, 2000);
	if (failed)
		goto err;
	if (pd)
		id->id.pd = pd; /* else the device's, which the id has from its creation */
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		if (res->ai_flags & RAI_PASSIVE) {
			id->listen_attr = malloc(sizeof(*qp_init_attr));
			if (!id->listen_attr) {
				errno = ENOMEM;
				goto err;
			}
			*id->listen_attr = *qp_init_attr;
		} else {
			if (!id->id.pd || rdma_create_qp(cm_id, id->id.pd, qp_init_attr))
				goto err;
		}
	}
	*out = cm_id;
	return 0;
err : {
	int e = errno;
	rdma_destroy_ep(cm_id);
	return cm_fail(e ? e : EINVAL);
}
}

EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct cm_id *l = (struct cm_id *)listen;
	if (!l->sync)
		return cm_fail(EINVAL);
	struct rdma_cm_event *event;
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &event))
			return -1;
		if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(event); /* nothing else concerns a listen */
	}
	if (event->status) {
		int status = event->status;
		rdma_ack_cm_event(event);
		return cm_fail(-status);
	}
	struct cm_id *id = (struct cm_id *)event->id;
	id->id.event = event;
	/* the request's id goes to a channel of its own, as a synchronous id's does */
	if (rdma_migrate_id(&id->id, NULL))
		goto err;
	if (l->listen_attr) {
		struct ibv_qp_init_attr attr = *l->listen_attr;
		if (l->id.pd)
			id->id.pd = l->id.pd;
		if (!id->id.pd || rdma_create_qp(&id->id, id->id.pd, &attr))
			goto err;
	}
	*out = &id->id;
	return 0;
err : {
	int e = errno;
	rdma_reject(&id->id, NULL, 0);
	return cm_fail(e ? e : EINVAL);
}
}
