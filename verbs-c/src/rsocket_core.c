/*
 * What every rsocket has, whatever its type: the descriptor table, the pair and its buffers, progress
 * (completions and connection events, handed to the type's operations), waiting, and poll(2) events.
 */
#include "rs_objects.h"

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock *table[RS_MAX_FD];

struct rsock *rs_get(int fd)
{
	if (fd < 0 || fd >= RS_MAX_FD)
		return NULL;
	pthread_mutex_lock(&table_lock);
	struct rsock *rs = table[fd];
	pthread_mutex_unlock(&table_lock);
	return rs;
}

void rs_forget(int fd)
{
	pthread_mutex_lock(&table_lock);
	table[fd] = NULL;
	pthread_mutex_unlock(&table_lock);
}

int rs_fail(int e)
{
	errno = e;
	return -1;
}

/* A new rsocket around a channel and an id (made by the caller); NULL with errno on failure. */
struct rsock *rs_alloc(struct rdma_event_channel *channel, struct rdma_cm_id *id, int type, const struct rs_ops *ops)
{
	if (channel->fd >= RS_MAX_FD) {
		errno = EMFILE;
		return NULL;
	}
	struct rsock *rs = calloc(1, sizeof(*rs));
	if (!rs) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&rs->lock, NULL);
	rs->fd = channel->fd;
	rs->type = type;
	rs->ops = ops;
	rs->channel = channel;
	rs->id = id;
	id->context = rs;
	rs->state = RS_NEW;
	rs->sndbuf = rs->rcvbuf = RS_DEFAULT_BUFFERS * RS_MSG;
	rs->nodelay = 1;
	rs->keepidle = 7200;
	rs->requests_tail = &rs->requests;
	pthread_mutex_lock(&table_lock);
	table[rs->fd] = rs;
	pthread_mutex_unlock(&table_lock);
	return rs;
}

void rs_set_nonblocking_channel(struct rsock *rs)
{
	int flags = fcntl(rs->channel->fd, F_GETFL);
	fcntl(rs->channel->fd, F_SETFL, flags | O_NONBLOCK);
}

int rs_post_receive(struct rsock *rs, int index)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rs->rbuf + (size_t)index * rs->each, .length = (uint32_t)rs->each, .lkey = rs->rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = RS_RECV_WR | (uint64_t)index, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(rs->qp, &wr, &bad);
}

void *rs_map_buffers(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/*
 * Makes a socket's completion channel (nonblocking: the library's waits are its own), its CQ, its pair
 * of `type` and its buffers, `each` bytes apiece: rcount to receive into, every one posted, and scount
 * to send from (plus `extra_sends` work requests without a buffer). Before connect, accept or bind.
 */
int rs_make_pair(struct rsock *rs, enum ibv_qp_type type, uint32_t extra_sends, size_t each)
{
	struct ibv_context *verbs = rs->id->verbs;
	rs->completions = ibv_create_comp_channel(verbs);
	if (!rs->completions)
		return errno ? errno : ENOMEM;
	int flags = fcntl(rs->completions->fd, F_GETFL);
	fcntl(rs->completions->fd, F_SETFL, flags | O_NONBLOCK);
	rs->cq = ibv_create_cq(verbs, rs->rcount + rs->scount + (int)extra_sends, rs, rs->completions, 0);
	if (!rs->cq)
		return errno ? errno : ENOMEM;
	struct ibv_qp_init_attr attr = { .send_cq = rs->cq, .recv_cq = rs->cq, .qp_type = type,
					 .cap = { .max_send_wr = (uint32_t)rs->scount + extra_sends, .max_recv_wr = (uint32_t)rs->rcount,
						  .max_send_sge = 1, .max_recv_sge = 1 } };
	if (rdma_create_qp(rs->id, rs->id->pd, &attr))
		return errno ? errno : EINVAL;
	rs->qp = rs->id->qp;
	rs->each = each;
	rs->rbuf_size = (size_t)rs->rcount * each;
	rs->sbuf_size = (size_t)rs->scount * each;
	rs->rbuf = rs_map_buffers(rs->rbuf_size);
	rs->sbuf = rs_map_buffers(rs->sbuf_size);
	rs->filled = calloc((size_t)rs->rcount, sizeof(*rs->filled));
	rs->free_slots = calloc((size_t)rs->scount, sizeof(int));
	if (!rs->rbuf || !rs->sbuf || !rs->filled || !rs->free_slots)
		return ENOMEM;
	rs->rmr = ibv_reg_mr(rs->id->pd, rs->rbuf, rs->rbuf_size, IBV_ACCESS_LOCAL_WRITE);
	rs->smr = ibv_reg_mr(rs->id->pd, rs->sbuf, rs->sbuf_size, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->rmr || !rs->smr)
		return errno ? errno : ENOMEM;
	for (int i = 0; i < rs->scount; i++)
		rs->free_slots[i] = i;
	rs->free_count = rs->scount;
	for (int i = 0; i < rs->rcount; i++)
		if (rs_post_receive(rs, i))
			return errno ? errno : EIO;
	return 0;
}

void rs_free_pair(struct rsock *rs)
{
	for (int i = 0; i < RS_MAX_MAPS; i++)
		if (rs->local[i].mr) {
			ibv_dereg_mr(rs->local[i].mr);
			rs->local[i].mr = NULL;
		}
	if (rs->qp)
		rdma_destroy_qp(rs->id);
	rs->qp = NULL;
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	rs->rmr = rs->smr = NULL;
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	rs->cq = NULL;
	if (rs->completions)
		ibv_destroy_comp_channel(rs->completions);
	rs->completions = NULL;
	if (rs->rbuf)
		munmap(rs->rbuf, rs->rbuf_size);
	if (rs->sbuf)
		munmap(rs->sbuf, rs->sbuf_size);
	rs->rbuf = rs->sbuf = NULL;
	free(rs->filled);
	free(rs->free_slots);
	rs->filled = NULL;
	rs->free_slots = NULL;
	if (rs->own_pd) {
		ibv_dealloc_pd(rs->own_pd);
		rs->id->pd = NULL;
		rs->own_pd = NULL;
	}
}

void rs_broken(struct rsock *rs, int e)
{
	if (rs->state != RS_FAILED && rs->state != RS_CLOSED) {
		rs->state = RS_FAILED;
		if (!rs->error)
			rs->error = e;
	}
}

static void poll_completions(struct rsock *rs)
{
	if (!rs->cq)
		return;
	struct ibv_wc wc[16];
	int n;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			uint64_t id = wc[i].wr_id;
			if (wc[i].status != IBV_WC_SUCCESS && rs->type == SOCK_STREAM) {
				/* flushed when the pair went to error (a disconnect); else the connection broke */
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					rs_broken(rs, ECONNRESET);
				else if (rs->state == RS_CONNECTED)
					rs->state = RS_CLOSED;
			}
			if (id & RS_RECV_WR) {
				if (wc[i].status == IBV_WC_SUCCESS)
					rs->ops->on_receive(rs, &wc[i]);
			} else if (id & RS_CTRL_WR) {
				rs->controls_in_flight--;
			} else {
				rs->free_slots[rs->free_count++] = RS_INDEX(id);
			}
		}
	}
}

/* Everything that came without waiting: completions, then connection events. Under rs->lock. */
void rs_progress(struct rsock *rs)
{
	poll_completions(rs);
	struct rdma_cm_event *ev;
	while (rs->channel && rdma_get_cm_event(rs->channel, &ev) == 0) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *id = ev->id;
			int done_with = rs->ops->on_request(rs, ev);
			rdma_ack_cm_event(ev);
			if (done_with)
				rdma_destroy_id(id); /* after its event's ack, which its destroy waits for */
			continue;
		}
		rs->ops->on_event(rs, ev);
		rdma_ack_cm_event(ev);
	}
	poll_completions(rs);
}

/* The poll(2) events of an rsocket now. */
short rs_events(struct rsock *rs)
{
	short ev = 0;
	if (rs->ops->readable(rs))
		ev |= POLLIN | POLLRDNORM;
	if (rs->ops->writable(rs))
		ev |= POLLOUT | POLLWRNORM;
	if (rs->state == RS_FAILED)
		ev |= POLLERR;
	/* hung up once nothing is left to read: a reader polls its last bytes without seeing a hang-up first */
	if ((rs->state == RS_CLOSED || (rs->peer_fin && rs->shut_write)) && !rs->filled_count)
		ev |= POLLHUP;
	return ev;
}

/* The descriptors that wake an rsocket's waiter; arms its CQ. Returns how many (at most two). */
int rs_wakers(struct rsock *rs, struct pollfd *out)
{
	int n = 0;
	if (rs->cq) {
		ibv_req_notify_cq(rs->cq, 0);
		out[n++] = (struct pollfd){ .fd = rs->completions->fd, .events = POLLIN };
	}
	out[n++] = (struct pollfd){ .fd = rs->channel->fd, .events = POLLIN };
	return n;
}

/* Drains the completion channel's notifications (after poll said it is readable). */
void rs_ack_notifications(struct rsock *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	if (rs->completions && ibv_get_cq_event(rs->completions, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
}

int64_t rs_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/*
 * Waits until `ready` holds (progress made each time something wakes the rsocket), or the timeout
 * (ms, -1: none) passes. Called and returns with rs->lock held; waits without it.
 */
int rs_wait(struct rsock *rs, int (*ready)(struct rsock *), int timeout)
{
	int64_t deadline = timeout < 0 ? -1 : rs_now_ms() + timeout;
	for (;;) {
		rs_progress(rs);
		if (ready(rs))
			return 0;
		struct pollfd fds[2];
		int n = rs_wakers(rs, fds);
		rs_progress(rs); /* what came between the last look and arming */
		if (ready(rs))
			return 0;
		int left = deadline < 0 ? -1 : (int)(deadline - rs_now_ms());
		if (deadline >= 0 && left <= 0)
			return ETIMEDOUT;
		pthread_mutex_unlock(&rs->lock);
		int r = poll(fds, (nfds_t)n, left < 0 || left > 100 ? 100 : left); /* a lost wake-up costs 100 ms at most */
		pthread_mutex_lock(&rs->lock);
		if (r > 0 && rs->cq && (fds[0].revents & POLLIN))
			rs_ack_notifications(rs);
	}
}
