/*
 * rsockets: librdmacm's sockets over RDMA (rdma/rsocket.h), built on this library's own rdma_cm and
 * verbs calls as rdma-core builds its on librdmacm's. A stream rsocket is an rdma_cm id with an RC
 * pair; its descriptor is the id's event channel's, a real file descriptor (unique, pollable).
 *
 * Both ends run this library, so the wire protocol is this file's own:
 *  - each side posts `rcount` receive buffers of RS_MSG bytes before it connects or accepts and says
 *    how many in the connection's private data;
 *  - data goes as SENDs of at most RS_MSG bytes, one receive each; a sender holds a credit per
 *    receive it may use (the peer's rcount less RS_RESERVED, kept for control messages) and gets
 *    them back from CREDIT messages, which the receiver sends once it has given a quarter of its
 *    buffers back (a quarter always fits in what a blocked sender has used, so nobody waits forever);
 *  - control messages are zero-length SENDs with immediate data (type in the top 4 bits): CREDIT
 *    (count), FIN (no more data: the reader sees end of file after what came before), IOMAP (its
 *    payload announces a riomap'd window: it uses a data credit);
 *  - riowrite is an RDMA WRITE into the peer's announced window, ordered with the stream as RC is.
 * A receive buffer that holds data is given back when the program has read all of it.
 */
#include "rs_objects.h"

static const struct rs_ops stream_ops;

#define RS_GET(rs, fd)                                                                                                           \
	struct rsock *rs = rs_get(fd);                                                                                           \
	if (!rs)                                                                                                                 \
		return rs_fail(EBADF);

static int buffers_for(int bytes)
{
	int n = bytes / RS_MSG;
	return n < RS_MIN_BUFFERS ? RS_MIN_BUFFERS : n > RS_MAX_BUFFERS ? RS_MAX_BUFFERS : n;
}

EXPORT int rsocket(int domain, int type, int protocol)
{
	if (domain != AF_INET && domain != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (!((kind == SOCK_STREAM && (!protocol || protocol == IPPROTO_TCP)) || (kind == SOCK_DGRAM && (!protocol || protocol == IPPROTO_UDP))))
		return rs_fail(EPROTONOSUPPORT);
	struct rdma_event_channel *channel = rdma_create_event_channel();
	if (!channel)
		return -1;
	struct rdma_cm_id *id;
	if (rdma_create_id(channel, &id, NULL, kind == SOCK_STREAM ? RDMA_PS_TCP : RDMA_PS_UDP)) {
		int e = errno;
		rdma_destroy_event_channel(channel);
		return rs_fail(e);
	}
	struct rsock *rs = rs_alloc(channel, id, kind, kind == SOCK_STREAM ? &stream_ops : &ds_ops);
	if (!rs) {
		int e = errno;
		rdma_destroy_id(id);
		rdma_destroy_event_channel(channel);
		return rs_fail(e);
	}
	rs->nonblocking = (type & SOCK_NONBLOCK) != 0;
	rs_set_nonblocking_channel(rs); /* the library reads events without waiting; waits are its own */
	return rs->fd;
}

/* ---- the connection's verbs ---------------------------------------------------------------------- */

/* A stream's pair: RC, buffers as SO_RCVBUF and SO_SNDBUF ask, sends kept for control messages. */
static int stream_pair(struct rsock *rs)
{
	if (!rs->id->pd) {
		rs->own_pd = ibv_alloc_pd(rs->id->verbs);
		if (!rs->own_pd)
			return errno ? errno : ENOMEM;
		rs->id->pd = rs->own_pd;
	}
	rs->rcount = buffers_for(rs->rcvbuf);
	rs->scount = buffers_for(rs->sndbuf);
	return rs_make_pair(rs, IBV_QPT_RC, RS_RESERVED, RS_MSG);
}

static struct rdma_conn_param conn_param(struct rsock *rs, struct rs_hello *hello)
{
	*hello = (struct rs_hello){ .version = 1, .buffers = htonl((uint32_t)rs->rcount) }; /* every byte set: it goes on the wire */
	struct rdma_conn_param p = { .private_data = hello, .private_data_len = sizeof(*hello), .responder_resources = 1,
				     .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	return p;
}

static int peer_buffers(const void *private_data, uint8_t length)
{
	const struct rs_hello *hello = private_data;
	if (!hello || length < sizeof(*hello) || hello->version != 1)
		return -1;
	return (int)ntohl(hello->buffers);
}

/* Sends a control message (a zero-length SEND with immediate data). */
static int send_control(struct rsock *rs, uint32_t type, uint32_t value)
{
	struct ibv_send_wr wr = { .wr_id = RS_CTRL_WR, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(type << 28 | (value & 0x0fffffffu)) },
			   *bad;
	int e = ibv_post_send(rs->qp, &wr, &bad);
	if (!e)
		rs->controls_in_flight++;
	return e;
}

/* Gives a read buffer back to the peer: reposted, and counted towards the next CREDIT. */
static void give_back(struct rsock *rs, int index)
{
	if (rs_post_receive(rs, index)) {
		rs_broken(rs, ECONNRESET);
		return;
	}
	rs->freed++;
	if (rs->freed >= rs->rcount / 4 && rs->state == RS_CONNECTED && !send_control(rs, RS_CREDIT, (uint32_t)rs->freed))
		rs->freed = 0;
}

/* ---- progress: completions and connection events -------------------------------------------------- */

static void on_receive(struct rsock *rs, struct ibv_wc *wc)
{
	int index = RS_INDEX(wc->wr_id);
	if (wc->wc_flags & IBV_WC_WITH_IMM) {
		uint32_t imm = ntohl(wc->imm_data);
		switch (RS_IMM_TYPE(imm)) {
		case RS_CREDIT:
			rs->credits += (int)RS_IMM_VALUE(imm);
			break;
		case RS_FIN:
			rs->peer_fin = 1;
			break;
		case RS_IOMAP:
			if (wc->byte_len >= sizeof(struct rs_window)) {
				struct rs_window w;
				memcpy(&w, rs->rbuf + (size_t)index * RS_MSG, sizeof(w));
				int slot = -1;
				for (int i = 0; i < rs->remote_count; i++)
					if (rs->remote[i].offset == w.offset)
						slot = i;
				if (slot < 0 && rs->remote_count < RS_MAX_MAPS)
					slot = rs->remote_count++;
				if (slot >= 0)
					rs->remote[slot] = w;
			}
			/* it used a data credit: the buffer goes back as a credit */
			give_back(rs, index);
			return;
		}
		if (rs_post_receive(rs, index)) /* a control message's buffer: straight back, no credit */
			rs_broken(rs, ECONNRESET);
		return;
	}
	int at = (rs->filled_head + rs->filled_count) % rs->rcount;
	rs->filled[at] = (struct rs_filled){ .index = index, .length = wc->byte_len, .read = 0 };
	rs->filled_count++;
}

static void on_connected(struct rsock *rs, int peer)
{
	if (peer < RS_MIN_BUFFERS) {
		rs_broken(rs, EPROTO);
		return;
	}
	rs->credits = peer - RS_RESERVED;
	rs->state = RS_CONNECTED;
}

/* Handles one connection event of a connecting or connected rsocket. */
static void on_event(struct rsock *rs, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(rs->id, 2000))
			rs_broken(rs, errno);
		else
			rs->state = RS_RESOLVING_ROUTE;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		int e = stream_pair(rs);
		struct rs_hello hello;
		struct rdma_conn_param p = conn_param(rs, &hello);
		if (e || rdma_connect(rs->id, &p))
			rs_broken(rs, e ? e : errno);
		else
			rs->state = RS_CONNECTING;
		break;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_CONNECTING)
			on_connected(rs, peer_buffers(ev->param.conn.private_data, ev->param.conn.private_data_len));
		else if (rs->state == RS_ACCEPTING)
			rs->state = RS_CONNECTED; /* credits were set from the request */
		break;
	case RDMA_CM_EVENT_REJECTED:
		rs_broken(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		rs_broken(rs, EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rs_broken(rs, ETIMEDOUT);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rs->peer_fin = 1;
		if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING)
			rs->state = RS_CLOSED;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rs_broken(rs, ENODEV);
		break;
	default:
		break;
	}
}

/* Takes a connection request into the listener's queue, or rejects it when the queue is full. */
static int on_request(struct rsock *rs, struct rdma_cm_event *ev)
{
	if (rs->state != RS_LISTENING)
		return 1;
	int peer = peer_buffers(ev->param.conn.private_data, ev->param.conn.private_data_len);
	struct rs_request *r = peer >= RS_MIN_BUFFERS && rs->queued < rs->backlog ? calloc(1, sizeof(*r)) : NULL;
	if (!r) {
		rdma_reject(ev->id, NULL, 0);
		return 1;
	}
	r->id = ev->id;
	r->peer_buffers = (uint32_t)peer;
	*rs->requests_tail = r;
	rs->requests_tail = &r->next;
	rs->queued++;
	return 0;
}

/* What the core hands a stream: its receives, connection requests and events, and its readiness. */
static int readable(struct rsock *rs);
static int writable(struct rsock *rs);
static const struct rs_ops stream_ops = { .on_receive = on_receive, .on_request = on_request, .on_event = on_event,
					  .readable = readable, .writable = writable };

static int readable(struct rsock *rs)
{
	if (rs->state == RS_LISTENING)
		return rs->queued > 0;
	return rs->filled_count > 0 || rs->peer_fin || rs->shut_read || rs->state == RS_FAILED || rs->state == RS_CLOSED;
}

static int writable(struct rsock *rs)
{
	if (rs->state == RS_CONNECTED)
		return (rs->credits > 0 && rs->free_count > 0) || rs->shut_write;
	return rs->state == RS_FAILED || rs->state == RS_CLOSED;
}

/* ---- binding, listening, connecting, accepting ---------------------------------------------------- */

EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	RS_GET(rs, socket);
	if (!addr || addrlen < sizeof(struct sockaddr_in))
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	int r = rs->state != RS_NEW ? rs_fail(EINVAL)
		: rs->type == SOCK_DGRAM ? ds_bind(rs, addr) : rdma_bind_addr(rs->id, (struct sockaddr *)addr);
	if (!r)
		rs->state = RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT int rlisten(int socket, int backlog)
{
	RS_GET(rs, socket);
	pthread_mutex_lock(&rs->lock);
	int r = 0;
	if (rs->state == RS_NEW) {
		struct sockaddr_in any = { .sin_family = AF_INET };
		r = rdma_bind_addr(rs->id, (struct sockaddr *)&any);
	} else if (rs->state != RS_BOUND && rs->state != RS_LISTENING) {
		r = rs_fail(EINVAL);
	}
	if (!r) {
		rs->backlog = backlog > 0 ? backlog : 1;
		if (rs->state != RS_LISTENING)
			r = rdma_listen(rs->id, rs->backlog);
		if (!r)
			rs->state = RS_LISTENING;
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

static int connect_done(struct rsock *rs)
{
	return rs->state == RS_CONNECTED || rs->state == RS_FAILED || rs->state == RS_CLOSED;
}

EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	RS_GET(rs, socket);
	if (!addr || addrlen < sizeof(struct sockaddr_in))
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	int r = 0;
	if (rs->type == SOCK_DGRAM) {
		r = ds_connect(rs, addr);
	} else if (rs->state == RS_CONNECTED) {
		r = rs_fail(EISCONN);
	} else if (rs->state == RS_RESOLVING_ADDR || rs->state == RS_RESOLVING_ROUTE || rs->state == RS_CONNECTING) {
		r = rs_fail(EALREADY);
	} else if (rs->state != RS_NEW && rs->state != RS_BOUND) {
		r = rs_fail(EINVAL);
	} else {
		struct sockaddr *src = rs->state == RS_BOUND ? rdma_get_local_addr(rs->id) : NULL;
		if (rdma_resolve_addr(rs->id, src, (struct sockaddr *)addr, 2000)) {
			r = -1;
		} else {
			rs->state = RS_RESOLVING_ADDR;
			if (rs->nonblocking) {
				rs_progress(rs);
				/* as a nonblocking socket's connect: the outcome, even a refusal already in, comes
				 * through rpoll and SO_ERROR */
				if (rs->state != RS_CONNECTED)
					r = rs_fail(EINPROGRESS);
			} else {
				rs_wait(rs, connect_done, -1);
				if (rs->state != RS_CONNECTED) {
					int e = rs->error ? rs->error : ECONNREFUSED;
					rs->error = 0;
					r = rs_fail(e);
				}
			}
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

static int has_request(struct rsock *rs)
{
	return rs->queued > 0 || rs->state != RS_LISTENING;
}

/* Accepts one queued request: its own channel (its descriptor), a pair, and rdma_accept. */
static int accept_request(struct rsock *listener, struct rs_request *req)
{
	struct rdma_event_channel *channel = rdma_create_event_channel();
	if (!channel)
		goto reject;
	if (rdma_migrate_id(req->id, channel)) {
		rdma_destroy_event_channel(channel);
		goto reject;
	}
	struct rsock *rs = rs_alloc(channel, req->id, SOCK_STREAM, &stream_ops);
	if (!rs) {
		rdma_reject(req->id, NULL, 0);
		rdma_destroy_id(req->id);
		rdma_destroy_event_channel(channel);
		return -1;
	}
	rs_set_nonblocking_channel(rs);
	rs->sndbuf = listener->sndbuf;
	rs->rcvbuf = listener->rcvbuf;
	rs->nodelay = listener->nodelay;
	rs->keepalive = listener->keepalive;
	rs->keepidle = listener->keepidle;
	rs->nonblocking = listener->nonblocking;
	struct rs_hello hello;
	int e = stream_pair(rs);
	struct rdma_conn_param p = conn_param(rs, &hello);
	if (e || rdma_accept(rs->id, &p)) {
		e = e ? e : errno;
		rdma_reject(rs->id, NULL, 0);
		rclose(rs->fd);
		return rs_fail(e);
	}
	rs->credits = (int)req->peer_buffers - RS_RESERVED;
	rs->state = RS_ACCEPTING;
	return rs->fd;
reject:
	rdma_reject(req->id, NULL, 0);
	rdma_destroy_id(req->id);
	return -1;
}

static int accept_done(struct rsock *rs)
{
	return rs->state != RS_ACCEPTING;
}

EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	RS_GET(listener, socket);
	pthread_mutex_lock(&listener->lock);
	if (listener->state != RS_LISTENING) {
		pthread_mutex_unlock(&listener->lock);
		return rs_fail(EINVAL);
	}
	for (;;) {
		if (listener->nonblocking) {
			rs_progress(listener);
			if (!listener->queued) {
				pthread_mutex_unlock(&listener->lock);
				return rs_fail(EAGAIN);
			}
		} else {
			rs_wait(listener, has_request, -1);
		}
		if (listener->state != RS_LISTENING) {
			pthread_mutex_unlock(&listener->lock);
			return rs_fail(EINVAL);
		}
		struct rs_request *req = listener->requests;
		listener->requests = req->next;
		if (!listener->requests)
			listener->requests_tail = &listener->requests;
		listener->queued--;
		int fd = accept_request(listener, req);
		free(req);
		if (fd < 0)
			continue; /* that one failed; the next */
		pthread_mutex_unlock(&listener->lock);
		struct rsock *rs = rs_get(fd);
		pthread_mutex_lock(&rs->lock);
		if (!rs->nonblocking)
			rs_wait(rs, accept_done, 10000);
		if (addr && addrlen) {
			socklen_t n = *addrlen < sizeof(struct sockaddr_storage) ? *addrlen : sizeof(struct sockaddr_storage);
			memcpy(addr, rdma_get_peer_addr(rs->id), n);
			*addrlen = rdma_get_peer_addr(rs->id)->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
		}
		pthread_mutex_unlock(&rs->lock);
		return fd;
	}
}

/* ---- data ---------------------------------------------------------------------------------------- */

static int can_send(struct rsock *rs)
{
	return rs->state != RS_CONNECTED || (rs->credits > 0 && rs->free_count > 0);
}

static int send_ready_state(struct rsock *rs)
{
	return rs->state != RS_ACCEPTING && rs->state != RS_CONNECTING && rs->state != RS_RESOLVING_ADDR
	       && rs->state != RS_RESOLVING_ROUTE;
}

/* Posts one message from `slot` (already filled with `length` bytes). */
static int post_message(struct rsock *rs, int slot, uint32_t length, int imm_type, uint32_t imm)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rs->sbuf + (size_t)slot * RS_MSG, .length = length, .lkey = rs->smr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	if (imm_type) {
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl((uint32_t)imm_type << 28 | (imm & 0x0fffffffu));
	}
	return ibv_post_send(rs->qp, &wr, &bad);
}

/* Sends from an iovec; the bytes sent, or -1 with errno. Under rs->lock. */
static ssize_t rs_sendv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	if (rs->type == SOCK_DGRAM)
		return ds_sendv(rs, iov, iovcnt, flags, NULL);
	size_t total = 0, want = 0;
	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	int nonblocking = rs->nonblocking || (flags & MSG_DONTWAIT);
	if (!nonblocking && !send_ready_state(rs))
		rs_wait(rs, send_ready_state, -1);
	int vi = 0;
	size_t vo = 0;
	while (total < want) {
		rs_progress(rs);
		if (rs->shut_write || rs->state == RS_CLOSED || rs->state == RS_FAILED) {
			if (total)
				break;
			int e = rs->state == RS_FAILED && rs->error ? rs->error : EPIPE;
			return rs_fail(e);
		}
		if (rs->state != RS_CONNECTED) {
			if (total)
				break;
			return rs_fail(rs->state == RS_NEW || rs->state == RS_BOUND || rs->state == RS_LISTENING ? ENOTCONN : EAGAIN);
		}
		if (!(rs->credits > 0 && rs->free_count > 0)) {
			if (nonblocking) {
				if (total)
					break;
				return rs_fail(EAGAIN);
			}
			rs_wait(rs, can_send, -1);
			continue;
		}
		int slot = rs->free_slots[--rs->free_count];
		uint8_t *to = rs->sbuf + (size_t)slot * RS_MSG;
		uint32_t n = 0;
		while (n < RS_MSG && vi < iovcnt) {
			size_t take = iov[vi].iov_len - vo;
			if (take > RS_MSG - n)
				take = RS_MSG - n;
			memcpy(to + n, (const uint8_t *)iov[vi].iov_base + vo, take);
			n += (uint32_t)take;
			vo += take;
			if (vo == iov[vi].iov_len) {
				vi++;
				vo = 0;
			}
		}
		if (post_message(rs, slot, n, 0, 0)) {
			rs->free_slots[rs->free_count++] = slot;
			rs_broken(rs, ECONNRESET);
			continue;
		}
		rs->credits--;
		total += n;
	}
	return (ssize_t)total;
}

static int can_receive(struct rsock *rs)
{
	return readable(rs);
}

/* Receives into an iovec; the bytes read, 0 at end of file, or -1 with errno. Under rs->lock. */
static ssize_t rs_recvv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	if (rs->type == SOCK_DGRAM)
		return ds_recvv(rs, iov, iovcnt, flags, NULL, NULL);
	size_t want = 0, total = 0;
	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (rs->state == RS_NEW || rs->state == RS_BOUND || rs->state == RS_LISTENING)
		return rs_fail(ENOTCONN);
	int nonblocking = rs->nonblocking || (flags & MSG_DONTWAIT);
	int vi = 0;
	size_t vo = 0;
	while (total < want) {
		rs_progress(rs);
		if (!rs->filled_count) {
			if (total && !(flags & MSG_WAITALL))
				break;
			if (rs->shut_read || rs->peer_fin || rs->state == RS_CLOSED)
				break; /* end of file */
			if (rs->state == RS_FAILED) {
				if (total)
					break;
				int e = rs->error ? rs->error : ECONNRESET;
				return rs_fail(e);
			}
			if (nonblocking) {
				if (total)
					break;
				return rs_fail(EAGAIN);
			}
			rs_wait(rs, can_receive, -1);
			continue;
		}
		/* copy from the filled buffers in order; with MSG_PEEK, without consuming */
		int at = rs->filled_head, left = rs->filled_count;
		uint32_t peek_read = rs->filled[at].read;
		while (left && total < want) {
			struct rs_filled *f = &rs->filled[at];
			uint32_t read = (flags & MSG_PEEK) ? peek_read : f->read;
			size_t take = f->length - read;
			size_t room = iov[vi].iov_len - vo;
			if (take > room)
				take = room;
			memcpy((uint8_t *)iov[vi].iov_base + vo, rs->rbuf + (size_t)f->index * RS_MSG + read, take);
			total += take;
			vo += take;
			if (vo == iov[vi].iov_len) {
				vi++;
				vo = 0;
			}
			read += (uint32_t)take;
			if (flags & MSG_PEEK) {
				peek_read = read;
				if (read == f->length) {
					at = (at + 1) % rs->rcount;
					left--;
					peek_read = left ? rs->filled[at].read : 0;
				}
			} else {
				f->read = read;
				if (read == f->length) {
					int index = f->index;
					rs->filled_head = (rs->filled_head + 1) % rs->rcount;
					rs->filled_count--;
					at = rs->filled_head;
					left--;
					give_back(rs, index);
				}
			}
		}
		if (flags & MSG_PEEK)
			break;
	}
	return (ssize_t)total;
}

EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	RS_GET(rs, socket);
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
	pthread_mutex_lock(&rs->lock);
	ssize_t r = rs_sendv(rs, &v, 1, flags);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr, socklen_t addrlen)
{
	RS_GET(rs, socket);
	if (rs->type != SOCK_DGRAM || !dest_addr)
		return rsend(socket, buf, len, flags); /* a stream socket's peer is its connection's, as with TCP */
	if (addrlen < sizeof(struct sockaddr_in))
		return rs_fail(EINVAL);
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
	pthread_mutex_lock(&rs->lock);
	ssize_t r = ds_sendv(rs, &v, 1, flags, dest_addr);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	RS_GET(rs, socket);
	if (!msg || msg->msg_iovlen > INT32_MAX)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	ssize_t r = rs_sendv(rs, msg->msg_iov, (int)msg->msg_iovlen, flags);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	RS_GET(rs, socket);
	if (iovcnt < 0)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	ssize_t r = rs_sendv(rs, iov, iovcnt, 0);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	RS_GET(rs, socket);
	struct iovec v = { .iov_base = buf, .iov_len = len };
	pthread_mutex_lock(&rs->lock);
	ssize_t r = rs_recvv(rs, &v, 1, flags);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen)
{
	RS_GET(rs, socket);
	if (rs->type == SOCK_DGRAM) {
		struct iovec v = { .iov_base = buf, .iov_len = len };
		pthread_mutex_lock(&rs->lock);
		ssize_t r = ds_recvv(rs, &v, 1, flags, src_addr, addrlen);
		pthread_mutex_unlock(&rs->lock);
		return r;
	}
	ssize_t r = rrecv(socket, buf, len, flags);
	if (r >= 0 && src_addr && addrlen)
		rgetpeername(socket, src_addr, addrlen);
	return r;
}

EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	RS_GET(rs, socket);
	if (!msg || msg->msg_iovlen > INT32_MAX)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	ssize_t r = rs_recvv(rs, msg->msg_iov, (int)msg->msg_iovlen, flags);
	pthread_mutex_unlock(&rs->lock);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	return r;
}

EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	RS_GET(rs, socket);
	if (iovcnt < 0)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	ssize_t r = rs_recvv(rs, iov, iovcnt, 0);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

/* ---- riomap: windows the peer writes into --------------------------------------------------------- */

EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	RS_GET(rs, socket);
	(void)flags;
	if (prot != PROT_WRITE || !buf || !len)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	off_t r = -1;
	int slot = -1;
	for (int i = 0; i < RS_MAX_MAPS; i++)
		if (!rs->local[i].mr) {
			slot = i;
			break;
		}
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING) {
		errno = ENOTCONN;
	} else if (slot < 0) {
		errno = ENOMEM;
	} else {
		if (offset == -1)
			offset = (off_t)(uintptr_t)buf;
		struct ibv_mr *mr = ibv_reg_mr(rs->id->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (mr) {
			/* announce it: an IOMAP message (it takes a data credit, as any message with a payload) */
			if (!send_ready_state(rs))
				rs_wait(rs, send_ready_state, -1);
			while (rs->state == RS_CONNECTED && !(rs->credits > 0 && rs->free_count > 0))
				rs_wait(rs, can_send, -1);
			if (rs->state == RS_CONNECTED) {
				int s = rs->free_slots[--rs->free_count];
				struct rs_window w = { .offset = (uint64_t)offset, .address = (uintptr_t)buf, .length = len, .rkey = mr->rkey };
				memcpy(rs->sbuf + (size_t)s * RS_MSG, &w, sizeof(w));
				if (post_message(rs, s, sizeof(w), RS_IOMAP, 0) == 0) {
					rs->credits--;
					rs->local[slot] = (struct rs_map){ .offset = offset, .address = buf, .length = len, .mr = mr };
					r = offset;
				} else {
					rs->free_slots[rs->free_count++] = s;
					ibv_dereg_mr(mr);
					errno = ECONNRESET;
				}
			} else {
				ibv_dereg_mr(mr);
				errno = rs->error ? rs->error : EPIPE;
			}
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT int riounmap(int socket, void *buf, size_t len)
{
	RS_GET(rs, socket);
	pthread_mutex_lock(&rs->lock);
	int r = rs_fail(EINVAL);
	for (int i = 0; i < RS_MAX_MAPS; i++)
		if (rs->local[i].mr && rs->local[i].address == buf && rs->local[i].length == len) {
			ibv_dereg_mr(rs->local[i].mr);
			rs->local[i].mr = NULL;
			r = 0;
			break;
		}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = rs_get(socket);
	if (!rs) {
		errno = EBADF;
		return (size_t)-1;
	}
	pthread_mutex_lock(&rs->lock);
	rs_progress(rs);
	struct rs_window *w = NULL;
	for (int i = 0; i < rs->remote_count; i++)
		if ((uint64_t)offset >= rs->remote[i].offset && (uint64_t)offset + count <= rs->remote[i].offset + rs->remote[i].length)
			w = &rs->remote[i];
	size_t total = 0;
	if (!w) {
		errno = EINVAL; /* no window of the peer's covers it */
		pthread_mutex_unlock(&rs->lock);
		return (size_t)-1;
	}
	int nonblocking = rs->nonblocking || (flags & MSG_DONTWAIT);
	while (total < count) {
		rs_progress(rs);
		if (rs->state != RS_CONNECTED) {
			errno = rs->state == RS_FAILED && rs->error ? rs->error : EPIPE;
			break;
		}
		if (!rs->free_count) {
			if (nonblocking) {
				errno = EAGAIN;
				break;
			}
			rs_wait(rs, can_send, -1);
			continue;
		}
		int slot = rs->free_slots[--rs->free_count];
		size_t n = count - total < RS_MSG ? count - total : RS_MSG;
		memcpy(rs->sbuf + (size_t)slot * RS_MSG, (const uint8_t *)buf + total, n);
		struct ibv_sge sge = { .addr = (uintptr_t)rs->sbuf + (size_t)slot * RS_MSG, .length = (uint32_t)n, .lkey = rs->smr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { .remote_addr = w->address + ((uint64_t)offset + total - w->offset), .rkey = w->rkey } },
				   *bad;
		if (ibv_post_send(rs->qp, &wr, &bad)) {
			rs->free_slots[rs->free_count++] = slot;
			rs_broken(rs, ECONNRESET);
			continue;
		}
		total += n;
	}
	pthread_mutex_unlock(&rs->lock);
	return total ? total : (size_t)-1;
}

/* ---- shutdown and close --------------------------------------------------------------------------- */

static int sends_done(struct rsock *rs)
{
	return rs->state != RS_CONNECTED || (rs->free_count == rs->scount && rs->controls_in_flight == 0);
}

/* Sends FIN once: what was sent before it is read first, then end of file. Under rs->lock. */
static void send_fin(struct rsock *rs)
{
	if (rs->fin_sent || rs->state != RS_CONNECTED)
		return;
	if (send_control(rs, RS_FIN, 0) == 0)
		rs->fin_sent = 1;
}

EXPORT int rshutdown(int socket, int how)
{
	RS_GET(rs, socket);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	int r = 0;
	if (rs->type == SOCK_DGRAM) {
		rs->shut_read |= how != SHUT_WR;
		rs->shut_write |= how != SHUT_RD;
	} else if (rs->state != RS_CONNECTED && rs->state != RS_CLOSED && rs->state != RS_FAILED && rs->state != RS_ACCEPTING) {
		r = rs_fail(ENOTCONN);
	} else {
		if (how != SHUT_WR)
			rs->shut_read = 1;
		if (how != SHUT_RD) {
			if (rs->state == RS_ACCEPTING)
				rs_wait(rs, accept_done, 10000);
			send_fin(rs);
			rs->shut_write = 1;
		}
		if (how == SHUT_RDWR) {
			rs_wait(rs, sends_done, 2000); /* what was sent reaches the peer before the disconnect */
			if (rs->state == RS_CONNECTED)
				rdma_disconnect(rs->id);
			rs->state = RS_CLOSED;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT int rclose(int socket)
{
	RS_GET(rs, socket);
	rs_forget(socket);
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING) {
		if (rs->state == RS_ACCEPTING)
			rs_wait(rs, accept_done, 1000);
		send_fin(rs);
		int linger = rs->linger.l_onoff ? rs->linger.l_linger * 1000 : 2000;
		rs_wait(rs, sends_done, linger);
		if (rs->state == RS_CONNECTED)
			rdma_disconnect(rs->id);
	}
	if (rs->type == SOCK_DGRAM)
		ds_free(rs);
	while (rs->requests) {
		struct rs_request *req = rs->requests;
		rs->requests = req->next;
		rdma_reject(req->id, NULL, 0);
		rdma_destroy_id(req->id);
		free(req);
	}
	rs_free_pair(rs);
	rdma_destroy_id(rs->id);
	rdma_destroy_event_channel(rs->channel);
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
	return 0;
}

/* ---- names, options, fcntl ------------------------------------------------------------------------ */

static int copy_address(const struct sockaddr *from, struct sockaddr *addr, socklen_t *addrlen)
{
	if (!addr || !addrlen)
		return rs_fail(EFAULT);
	socklen_t size = from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	memcpy(addr, from, *addrlen < size ? *addrlen : size);
	*addrlen = size;
	return 0;
}

EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	RS_GET(rs, socket);
	if (rs->type == SOCK_DGRAM) {
		pthread_mutex_lock(&rs->lock);
		int r = addr && addrlen ? ds_peer_name(rs, addr, addrlen) : rs_fail(EFAULT);
		pthread_mutex_unlock(&rs->lock);
		return r;
	}
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING && rs->state != RS_CLOSED)
		return rs_fail(ENOTCONN);
	return copy_address(rdma_get_peer_addr(rs->id), addr, addrlen);
}

EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	RS_GET(rs, socket);
	return copy_address(rdma_get_local_addr(rs->id), addr, addrlen);
}

static int *int_option(struct rsock *rs, int level, int name)
{
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_SNDBUF: return &rs->sndbuf;
		case SO_RCVBUF: return &rs->rcvbuf;
		case SO_KEEPALIVE: return &rs->keepalive;
		case SO_REUSEADDR: return &rs->reuseaddr;
		}
	} else if (level == IPPROTO_TCP) {
		switch (name) {
		case TCP_NODELAY: return &rs->nodelay;
		case TCP_KEEPIDLE: return &rs->keepidle;
		}
	} else if (level == SOL_RDMA) {
		switch (name) {
		case RDMA_INLINE: return &rs->inline_size;
		case RDMA_IOMAPSIZE: return &rs->iomap_size;
		}
	}
	return NULL;
}

EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	RS_GET(rs, socket);
	if (!optval)
		return rs_fail(EFAULT);
	pthread_mutex_lock(&rs->lock);
	int r = 0;
	int *slot = int_option(rs, level, optname);
	if (level == SOL_SOCKET && optname == SO_LINGER && optlen >= sizeof(struct linger)) {
		memcpy(&rs->linger, optval, sizeof(struct linger));
	} else if (level == SOL_RDMA && (optname == RDMA_SQSIZE || optname == RDMA_RQSIZE) && optlen >= sizeof(uint32_t)) {
		uint32_t n;
		memcpy(&n, optval, sizeof(n)); /* queue sizes follow the buffers (one request each) */
		if (optname == RDMA_SQSIZE)
			rs->sndbuf = (int)(n * RS_MSG);
		else
			rs->rcvbuf = (int)(n * RS_MSG);
	} else if (level == SOL_RDMA && optname == RDMA_ROUTE) {
		/* a resolved route from rdma_getaddrinfo: ours are resolved by the node anyway */
	} else if (slot && optlen >= sizeof(int)) {
		memcpy(slot, optval, sizeof(int));
	} else {
		r = rs_fail(slot ? EINVAL : ENOPROTOOPT);
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	RS_GET(rs, socket);
	if (!optval || !optlen)
		return rs_fail(EFAULT);
	pthread_mutex_lock(&rs->lock);
	int r = 0;
	int value = 0, *slot = int_option(rs, level, optname);
	if (level == SOL_SOCKET && optname == SO_ERROR) {
		rs_progress(rs);
		value = rs->error;
		rs->error = 0;
		slot = &value;
	} else if (level == SOL_SOCKET && optname == SO_LINGER) {
		socklen_t n = *optlen < sizeof(struct linger) ? *optlen : sizeof(struct linger);
		memcpy(optval, &rs->linger, n);
		*optlen = n;
		pthread_mutex_unlock(&rs->lock);
		return 0;
	} else if (level == SOL_RDMA && (optname == RDMA_SQSIZE || optname == RDMA_RQSIZE)) {
		value = buffers_for(optname == RDMA_SQSIZE ? rs->sndbuf : rs->rcvbuf);
		slot = &value;
	}
	if (!slot) {
		r = rs_fail(ENOPROTOOPT);
	} else {
		socklen_t n = *optlen < sizeof(int) ? *optlen : sizeof(int);
		memcpy(optval, slot, n);
		*optlen = n;
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

EXPORT int rfcntl(int socket, int cmd, ...)
{
	RS_GET(rs, socket);
	va_list args;
	va_start(args, cmd);
	int r;
	switch (cmd) {
	case F_GETFL:
		r = O_RDWR | (rs->nonblocking ? O_NONBLOCK : 0);
		break;
	case F_SETFL: {
		int flags = va_arg(args, int);
		pthread_mutex_lock(&rs->lock);
		rs->nonblocking = (flags & O_NONBLOCK) != 0;
		pthread_mutex_unlock(&rs->lock);
		r = 0;
		break;
	}
	default:
		r = rs_fail(ENOSYS);
	}
	va_end(args);
	return r;
}

/* ---- rpoll and rselect ---------------------------------------------------------------------------- */

/*
 * poll(2) over rsockets and ordinary descriptors alike: each rsocket's state after the progress that
 * came without waiting; if none is ready, a poll(2) over the ordinary descriptors and what wakes
 * each rsocket (its completion channel, its event channel), then another look.
 */
EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	int64_t deadline = timeout < 0 ? -1 : rs_now_ms() + timeout;
	struct pollfd *real = calloc(nfds * 2 + 1, sizeof(*real));
	int *owner = calloc(nfds * 2 + 1, sizeof(int));
	if (!real || !owner) {
		free(real);
		free(owner);
		return rs_fail(ENOMEM);
	}
	int ready;
	for (;;) {
		ready = 0;
		int n = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			fds[i].revents = 0;
			struct rsock *rs = rs_get(fds[i].fd);
			if (!rs) {
				if (fds[i].fd >= 0) {
					owner[n] = (int)i;
					real[n++] = (struct pollfd){ .fd = fds[i].fd, .events = fds[i].events };
				}
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			rs_progress(rs);
			short ev = rs_events(rs) & (fds[i].events | POLLERR | POLLHUP);
			if (!ev && !ready) {
				int before = n;
				n += rs_wakers(rs, real + n);
				for (int k = before; k < n; k++)
					owner[k] = -1 - (int)i;
				rs_progress(rs); /* what came between the last look and arming */
				ev = rs_events(rs) & (fds[i].events | POLLERR | POLLHUP);
			}
			pthread_mutex_unlock(&rs->lock);
			if (ev) {
				fds[i].revents = ev;
				ready++;
			}
		}
		int left = deadline < 0 ? -1 : (int)(deadline - rs_now_ms());
		if (left < 0 && deadline >= 0)
			left = 0;
		int wait = ready ? 0 : (left < 0 || left > 100 ? 100 : left);
		int r = n ? poll(real, (nfds_t)n, wait) : (wait ? (poll(NULL, 0, wait), 0) : 0);
		if (r < 0) {
			ready = -1;
			break;
		}
		for (int k = 0; k < n && r > 0; k++) {
			if (!real[k].revents)
				continue;
			if (owner[k] >= 0) {
				if (!fds[owner[k]].revents)
					ready++;
				fds[owner[k]].revents = real[k].revents;
			} else {
				struct rsock *rs = rs_get(fds[-1 - owner[k]].fd);
				if (rs && rs->completions && real[k].fd == rs->completions->fd) {
					pthread_mutex_lock(&rs->lock);
					rs_ack_notifications(rs);
					pthread_mutex_unlock(&rs->lock);
				}
			}
		}
		if (ready || (deadline >= 0 && rs_now_ms() >= deadline))
			break;
	}
	free(real);
	free(owner);
	return ready;
}

EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *fds = calloc((size_t)(nfds > 0 ? nfds : 1), sizeof(*fds));
	if (!fds)
		return rs_fail(ENOMEM);
	nfds_t n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short events = 0;
		if (readfds && FD_ISSET(fd, readfds))
			events |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			events |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			events |= POLLPRI;
		if (events)
			fds[n++] = (struct pollfd){ .fd = fd, .events = events };
	}
	int ms = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
	int r = rpoll(fds, n, ms);
	if (r >= 0) {
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		r = 0;
		for (nfds_t i = 0; i < n; i++) {
			if (readfds && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(fds[i].fd, readfds);
				r++;
			}
			if (writefds && (fds[i].revents & (POLLOUT | POLLERR))) {
				FD_SET(fds[i].fd, writefds);
				r++;
			}
			if (exceptfds && (fds[i].revents & POLLPRI)) {
				FD_SET(fds[i].fd, exceptfds);
				r++;
			}
		}
	}
	free(fds);
	return r;
}
