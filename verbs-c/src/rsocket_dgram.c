/*
 * Datagram rsockets: a UDP-like socket over one UD pair. Each datagram carries a small header with
 * its sender's bound address (as rdma-core's datagram rsockets do), so the receiver's rrecvfrom
 * names the sender and learns how to answer it (the completion's source LID and pair). A first send
 * to an address nobody has sent from resolves it through SIDR: the destination socket's id listens
 * on its port and answers with its pair's number. Datagrams are unreliable, as UDP's: one that finds
 * no receive posted is dropped (and counted by the node).
 */
#include "rs_objects.h"

#define DS_GRH 40               /* a UD receive's first bytes: the GRH's room */
#define DS_BUFFERS 64           /* receive buffers and send slots */
#define DS_MAX_DESTS 64

/* What each datagram starts with: the sender's bound address. */
struct ds_header {
	uint8_t version;
	uint8_t family;             /* 4 or 6 */
	uint16_t port;              /* network order */
	uint32_t reserved;
	uint8_t address[16];
};

/* Where datagrams to one address go: its node's LID and its socket's pair. */
struct ds_dest {
	struct sockaddr_storage address;
	struct ibv_ah *ah;
	uint32_t qpn, qkey;
	struct ds_dest *next;
};

static size_t stride(struct rsock *rs)
{
	return DS_GRH + sizeof(struct ds_header) + rs->max_datagram;
}

static int same_address(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
}

static socklen_t address_size(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* The UD pair, its CQ and buffers, every receive posted; the id listens on its port to answer SIDR. */
static int make_pair(struct rsock *rs)
{
	if (rs->qp)
		return 0;
	struct ibv_port_attr port;
	if (ibv_query_port(rs->id->verbs, 1, &port))
		return errno ? errno : EIO;
	uint32_t mtu = 128u << port.active_mtu; /* IBV_MTU_256 is 1 */
	rs->max_datagram = mtu - sizeof(struct ds_header);
	rs->rcount = rs->scount = DS_BUFFERS;
	int e = rs_make_pair(rs, IBV_QPT_UD, 0, stride(rs));
	if (e)
		return e;
	if (rdma_listen(rs->id, 64))
		return errno ? errno : EINVAL;
	rs->state = RS_BOUND;
	return 0;
}

int ds_bind(struct rsock *rs, const struct sockaddr *addr)
{
	if (rdma_bind_addr(rs->id, (struct sockaddr *)addr))
		return -1;
	struct sockaddr *local = rdma_get_local_addr(rs->id);
	memcpy(&rs->self, local, address_size(local));
	int e = make_pair(rs);
	return e ? rs_fail(e) : 0;
}

/* An unbound socket's first send or connect binds it as UDP's does: any address, a port of its own. */
static int bind_implicitly(struct rsock *rs, int family)
{
	if (rs->qp)
		return 0;
	struct sockaddr_storage any = { .ss_family = (sa_family_t)family };
	return ds_bind(rs, (struct sockaddr *)&any);
}

static int wait_event(struct rdma_event_channel *channel, enum rdma_cm_event_type wanted, struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(channel, &ev))
		return errno ? errno : EIO;
	if (ev->event != wanted) {
		int e = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED
			: ev->event == RDMA_CM_EVENT_ADDR_ERROR || ev->event == RDMA_CM_EVENT_ROUTE_ERROR ? EHOSTUNREACH : ETIMEDOUT;
		rdma_ack_cm_event(ev);
		return e;
	}
	*out = ev;
	return 0;
}

/*
 * Resolves `to` through SIDR on an id of its own: the address to its node, then the socket bound to it
 * answers with its pair's number and Q_Key. Blocks (a first send to an address, as a route lookup would).
 */
static struct ds_dest *resolve(struct rsock *rs, const struct sockaddr *to)
{
	struct rdma_event_channel *channel = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *ev = NULL;
	struct ds_dest *d = NULL;
	int e = channel ? 0 : (errno ? errno : ENOMEM);
	if (!e && rdma_create_id(channel, &id, NULL, RDMA_PS_UDP))
		e = errno;
	if (!e && rdma_resolve_addr(id, NULL, (struct sockaddr *)to, 2000))
		e = errno;
	if (!e && !(e = wait_event(channel, RDMA_CM_EVENT_ADDR_RESOLVED, &ev))) {
		rdma_ack_cm_event(ev);
		/* bound to any address: datagrams name the address the node resolves from */
		struct sockaddr *src = rdma_get_local_addr(id);
		if (rs->self.ss_family == AF_INET && src->sa_family == AF_INET && !((struct sockaddr_in *)&rs->self)->sin_addr.s_addr)
			((struct sockaddr_in *)&rs->self)->sin_addr = ((struct sockaddr_in *)src)->sin_addr;
	}
	if (!e && rdma_resolve_route(id, 2000))
		e = errno;
	if (!e && !(e = wait_event(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev)))
		rdma_ack_cm_event(ev);
	struct rdma_conn_param p = { .private_data = NULL };
	if (!e && rdma_connect(id, &p))
		e = errno;
	if (!e && !(e = wait_event(channel, RDMA_CM_EVENT_ESTABLISHED, &ev))) {
		d = calloc(1, sizeof(*d));
		if (d) {
			memcpy(&d->address, to, address_size(to));
			d->qpn = ev->param.ud.qp_num;
			d->qkey = ev->param.ud.qkey;
			d->ah = ibv_create_ah(rs->id->pd, &ev->param.ud.ah_attr);
			if (!d->ah) {
				e = errno ? errno : ENOMEM;
				free(d);
				d = NULL;
			}
		} else {
			e = ENOMEM;
		}
		rdma_ack_cm_event(ev);
	}
	if (id)
		rdma_destroy_id(id);
	if (channel)
		rdma_destroy_event_channel(channel);
	errno = e;
	return d;
}

/* Keeps `d` first in the socket's list; the oldest beyond DS_MAX_DESTS goes (not rconnect's). */
static void remember(struct rsock *rs, struct ds_dest *d)
{
	d->next = rs->dests;
	rs->dests = d;
	int n = 0;
	for (struct ds_dest **p = &rs->dests; *p; p = &(*p)->next) {
		if (++n > DS_MAX_DESTS && *p != rs->peer) {
			struct ds_dest *old = *p;
			*p = old->next;
			ibv_destroy_ah(old->ah);
			free(old);
			break;
		}
	}
}

static struct ds_dest *find(struct rsock *rs, const struct sockaddr *to)
{
	for (struct ds_dest *d = rs->dests; d; d = d->next)
		if (same_address((struct sockaddr *)&d->address, to))
			return d;
	return NULL;
}

static struct ds_dest *dest_for(struct rsock *rs, const struct sockaddr *to)
{
	struct ds_dest *d = find(rs, to);
	if (!d && (d = resolve(rs, to)))
		remember(rs, d);
	return d;
}

int ds_connect(struct rsock *rs, const struct sockaddr *addr)
{
	int e = bind_implicitly(rs, addr->sa_family);
	if (e)
		return -1;
	struct ds_dest *d = dest_for(rs, addr);
	if (!d)
		return -1;
	rs->peer = d;
	return 0;
}

static int ds_readable(struct rsock *rs)
{
	return rs->filled_count > 0 || rs->shut_read;
}

static int ds_writable(struct rsock *rs)
{
	return !rs->qp || rs->free_count > 0;
}

static int can_send(struct rsock *rs)
{
	return ds_writable(rs);
}

static int can_receive(struct rsock *rs)
{
	return ds_readable(rs);
}

ssize_t ds_sendv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *to)
{
	if (rs->shut_write)
		return rs_fail(EPIPE);
	struct ds_dest *d;
	if (to) {
		if (bind_implicitly(rs, to->sa_family))
			return -1;
		if (!(d = dest_for(rs, to)))
			return -1;
	} else if (!(d = rs->peer)) {
		return rs_fail(EDESTADDRREQ);
	}
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > rs->max_datagram)
		return rs_fail(EMSGSIZE);
	rs_progress(rs);
	while (!rs->free_count) {
		if (rs->nonblocking || (flags & MSG_DONTWAIT))
			return rs_fail(EAGAIN);
		rs_wait(rs, can_send, -1);
	}
	int slot = rs->free_slots[--rs->free_count];
	uint8_t *at = rs->sbuf + (size_t)slot * stride(rs);
	struct ds_header h = { .version = 1 };
	struct sockaddr *self = (struct sockaddr *)&rs->self;
	if (self->sa_family == AF_INET6) {
		h.family = 6;
		h.port = ((struct sockaddr_in6 *)self)->sin6_port;
		memcpy(h.address, &((struct sockaddr_in6 *)self)->sin6_addr, 16);
	} else {
		h.family = 4;
		h.port = ((struct sockaddr_in *)self)->sin_port;
		memcpy(h.address, &((struct sockaddr_in *)self)->sin_addr, 4);
	}
	memcpy(at, &h, sizeof(h));
	size_t off = sizeof(h);
	for (int i = 0; i < iovcnt; i++) {
		memcpy(at + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = (uint32_t)off, .lkey = rs->smr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				  .wr.ud = { .ah = d->ah, .remote_qpn = d->qpn, .remote_qkey = d->qkey } },
			   *bad;
	int e = ibv_post_send(rs->qp, &wr, &bad);
	if (e) {
		rs->free_slots[rs->free_count++] = slot;
		return rs_fail(e);
	}
	return (ssize_t)len;
}

static void ds_on_receive(struct rsock *rs, struct ibv_wc *wc)
{
	int index = RS_INDEX(wc->wr_id);
	if (wc->byte_len < DS_GRH + sizeof(struct ds_header)) {
		rs_post_receive(rs, index); /* not one of ours: dropped */
		return;
	}
	int at = (rs->filled_head + rs->filled_count) % rs->rcount;
	rs->filled[at] = (struct rs_filled){ .index = index, .length = wc->byte_len - DS_GRH - (uint32_t)sizeof(struct ds_header),
					     .src_qp = wc->src_qp, .slid = wc->slid };
	rs->filled_count++;
}

/* The sender's address from a datagram's header; false when it is not one. */
static int sender_of(const struct ds_header *h, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (h->family == 4) {
		struct sockaddr_in *a = (struct sockaddr_in *)out;
		a->sin_family = AF_INET;
		a->sin_port = h->port;
		memcpy(&a->sin_addr, h->address, 4);
		return 1;
	}
	if (h->family == 6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
		a->sin6_family = AF_INET6;
		a->sin6_port = h->port;
		memcpy(&a->sin6_addr, h->address, 16);
		return 1;
	}
	return 0;
}

/* Learns how to answer a sender: its node's LID and its pair, as the completion gave them. */
static void learn(struct rsock *rs, const struct sockaddr_storage *from, const struct rs_filled *f)
{
	if (find(rs, (const struct sockaddr *)from))
		return;
	struct ibv_ah_attr attr = { .dlid = f->slid, .port_num = 1 };
	struct ds_dest *d = calloc(1, sizeof(*d));
	if (!d)
		return;
	d->ah = ibv_create_ah(rs->id->pd, &attr);
	if (!d->ah) {
		free(d);
		return;
	}
	d->address = *from;
	d->qpn = f->src_qp;
	d->qkey = RDMA_UDP_QKEY;
	remember(rs, d);
}

ssize_t ds_recvv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	if (!rs->qp)
		return rs_fail(rs->nonblocking || (flags & MSG_DONTWAIT) ? EAGAIN : ENOTCONN); /* nothing can arrive before a bind */
	rs_progress(rs);
	while (!rs->filled_count) {
		if (rs->shut_read)
			return 0;
		if (rs->nonblocking || (flags & MSG_DONTWAIT))
			return rs_fail(EAGAIN);
		rs_wait(rs, can_receive, -1);
	}
	struct rs_filled *f = &rs->filled[rs->filled_head];
	const uint8_t *at = rs->rbuf + (size_t)f->index * stride(rs) + DS_GRH;
	struct ds_header h;
	memcpy(&h, at, sizeof(h));
	size_t copied = 0;
	for (int i = 0; i < iovcnt && copied < f->length; i++) {
		size_t take = f->length - copied < iov[i].iov_len ? f->length - copied : iov[i].iov_len;
		memcpy(iov[i].iov_base, at + sizeof(h) + copied, take);
		copied += take;
	}
	struct sockaddr_storage sender;
	int known = sender_of(&h, &sender);
	if (known)
		learn(rs, &sender, f);
	if (from && fromlen) {
		if (known) {
			socklen_t size = address_size((struct sockaddr *)&sender);
			memcpy(from, &sender, *fromlen < size ? *fromlen : size);
			*fromlen = size;
		} else {
			*fromlen = 0;
		}
	}
	ssize_t length = (flags & MSG_TRUNC) ? (ssize_t)f->length : (ssize_t)copied; /* the rest is dropped, as UDP drops it */
	if (!(flags & MSG_PEEK)) {
		int index = f->index;
		rs->filled_head = (rs->filled_head + 1) % rs->rcount;
		rs->filled_count--;
		rs_post_receive(rs, index);
	}
	return length;
}

/* A SIDR request for the socket's port: answered with its pair's number (the id is destroyed after). */
static int ds_on_request(struct rsock *rs, struct rdma_cm_event *ev)
{
	struct rdma_conn_param p = { .qp_num = rs->qp ? rs->qp->qp_num : 0 };
	if (!rs->qp || rdma_accept(ev->id, &p))
		rdma_reject(ev->id, NULL, 0);
	return 1; /* the request's id is done with once answered */
}

int ds_peer_name(struct rsock *rs, struct sockaddr *addr, socklen_t *addrlen)
{
	if (!rs->peer)
		return rs_fail(ENOTCONN);
	socklen_t size = address_size((struct sockaddr *)&rs->peer->address);
	memcpy(addr, &rs->peer->address, *addrlen < size ? *addrlen : size);
	*addrlen = size;
	return 0;
}

void ds_free(struct rsock *rs)
{
	while (rs->dests) {
		struct ds_dest *d = rs->dests;
		rs->dests = d->next;
		ibv_destroy_ah(d->ah);
		free(d);
	}
	rs->peer = NULL;
}

static void ds_on_event(struct rsock *rs, struct rdma_cm_event *ev)
{
	(void)rs; /* a datagram socket's own id has no connection: nothing else comes */
	(void)ev;
}

const struct rs_ops ds_ops = { .on_receive = ds_on_receive, .on_request = ds_on_request, .on_event = ds_on_event,
			       .readable = ds_readable, .writable = ds_writable };
