/*
 * The connection manager's multicast (rdma_join_multicast, rdma_leave_multicast). A group's address maps to the same LID and GID on every node (a hash of the address into
 * 0xC000..0xFFFE; the GID as IPoIB maps an IPv4 group: ff12:401b:ffff::a.b.c.d), so that datagrams any
 * member sends through the LID reach every pair attached to it. The node answers MULTICAST_JOIN at
 * once (the groups are the fabric's: no subnet manager admits members); the library attaches the
 * id's pair when the event comes, as librdmacm does.
 */
#include "cm_objects.h"
#include "cm_node.h"
#include "cm_multicast.h"

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
	cm_address_of(addr, ip, &port);
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

/* MULTICAST_JOIN for `group`: the event gets the group's address handle and context, and the id's pair is attached. */
void cm_multicast_joined(struct cm_id *id, const Pagewire__Verbs__V1__CmAddress *group, struct rdma_cm_event *event)
{
	pthread_mutex_lock(&id->lock);
	struct cm_group *g = group ? group_of(id, group->ip.data, group->ip.len) : NULL;
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
}
