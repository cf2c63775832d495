/*
 * Completion queues and channels: a CQ holds the completions the reader or a poller drained from the
 * event ring, cqe of them; polling, arming (next or solicited) and channel events.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"

/*
 * Puts a completion on its CQ, which holds cq.cqe of them: one that finds it full is lost and the CQ's
 * owner hears IBV_EVENT_CQ_ERR, as from an HCA (and Soft-RoCE). A CQ armed for solicited events only is
 * woken by a solicited receive or an error.
 */
void pw_cq_push(struct pw_context *ctx, struct pw_cq *cq, const struct ibv_wc *wc, int solicited)
{
	pthread_mutex_lock(&cq->lock);
	struct pw_wc_queue *q = &cq->queue;
	if (q->count == q->capacity) {
		pthread_mutex_unlock(&cq->lock);
		pw_log(PW_ERROR, "completion queue %p overflowed its %d entries: the completion of work request 0x%lx is lost", (void *)cq,
		       q->capacity, (unsigned long)wc->wr_id);
		struct ibv_async_event ae;
		memset(&ae, 0, sizeof(ae));
		ae.event_type = IBV_EVENT_CQ_ERR;
		ae.element.cq = &cq->cq;
		pw_queue_async_event(ctx, &ae);
		return;
	}
	q->entries[(q->head + q->count) % q->capacity] = *wc;
	q->count++;
	int notify = cq->armed == PW_ARMED_NEXT || (cq->armed == PW_ARMED_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS));
	if (notify)
		cq->armed = 0;
	pthread_mutex_unlock(&cq->lock);
	if (notify && cq->cq.channel) {
		struct pw_channel *ch = (struct pw_channel *)cq->cq.channel;
		struct ibv_cq *which = &cq->cq;
		if (write(ch->write_fd, &which, sizeof(which)) != sizeof(which))
			pw_log(PW_ERROR, "cannot signal a completion channel: %s", strerror(errno));
	}
}


EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct pw_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];
	if (!ch || pipe2(fds, O_CLOEXEC) < 0) {
		free(ch);
		errno = ENOMEM;
		return NULL;
	}
	ch->channel.context = context;
	ch->channel.fd = fds[0];
	ch->channel.refcnt = 0;
	ch->write_fd = fds[1];
	return &ch->channel;
}

EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct pw_channel *ch = (struct pw_channel *)channel;
	if (channel->refcnt)
		return EBUSY;
	close(ch->channel.fd);
	close(ch->write_fd);
	free(ch);
	return 0;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
				    int comp_vector)
{
	(void)comp_vector;
	if (cqe < 1 || cqe > (1 << 22)) {
		errno = EINVAL;
		return NULL;
	}
	struct pw_cq *cq = calloc(1, sizeof(*cq));
	if (cq)
		cq->queue.entries = calloc((size_t)cqe, sizeof(struct ibv_wc));
	if (!cq || !cq->queue.entries) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->queue.capacity = cqe;
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	if (channel)
		__atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
	return &cq->cq;
}

/* ibv_resize_cq: to at least as many entries as the CQ holds now, as Soft-RoCE requires. */
EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (cqe < 1 || cqe > (1 << 22))
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	struct pw_wc_queue *q = &cq->queue;
	if (cqe < q->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	struct ibv_wc *entries = calloc((size_t)cqe, sizeof(*entries));
	if (!entries) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (int i = 0; i < q->count; i++)
		entries[i] = q->entries[(q->head + i) % q->capacity];
	free(q->entries);
	q->entries = entries;
	q->capacity = cqe;
	q->head = 0;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (cq->armed)
		__atomic_sub_fetch(&pw_armed_cqs, 1, __ATOMIC_RELAXED);
	if (ibcq->channel)
		__atomic_sub_fetch(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
	free(cq->queue.entries);
	free(cq);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/*
 * An empty poll. The NIC is the node's threads, on the same cores as the program: a program that polls
 * without end would hold a core the NIC needs (on two cores, until the next scheduler tick, ~4 ms). So
 * after polling in vain for a while (PAGEWIRE_VERBS_SPIN_US, 20 us by default) each empty poll yields,
 * as the SDK's busy waits do.
 */
static void idle_poll(struct pw_cq *cq)
{
	static int64_t spin_ns = -1;
	if (spin_ns < 0) {
		const char *s = getenv("PAGEWIRE_VERBS_SPIN_US");
		spin_ns = (s && *s ? atoll(s) : 20) * 1000;
	}
	uint64_t now = now_ns();
	if (cq->empty_since_ns == 0)
		cq->empty_since_ns = now;
	else if ((int64_t)(now - cq->empty_since_ns) >= spin_ns)
		sched_yield();
}

int pw_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	struct pw_context *ctx = pw_ctx(ibcq->context);
	if (cq->queue.count < num_entries)
		pw_drain(ctx);
	pthread_mutex_lock(&cq->lock);
	int n = 0;
	struct pw_wc_queue *q = &cq->queue;
	while (n < num_entries && q->count > 0) {
		wc[n++] = q->entries[q->head];
		q->head = (q->head + 1) % q->capacity;
		q->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	if (n == 0)
		idle_poll(cq);
	else
		cq->empty_since_ns = 0;
	return n;
}

/* Arms the CQ for its next completion, or (solicited_only) its next solicited receive or error; NEXT wins over SOLICITED. */
int pw_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	pthread_mutex_lock(&cq->lock);
	if (!cq->armed)
		__atomic_add_fetch(&pw_armed_cqs, 1, __ATOMIC_RELAXED);
	if (cq->armed != PW_ARMED_NEXT)
		cq->armed = solicited_only ? PW_ARMED_SOLICITED : PW_ARMED_NEXT;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct ibv_cq *which;
	for (;;) {
		ssize_t n = read(channel->fd, &which, sizeof(which));
		if (n == sizeof(which))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		return -1;
	}
	__atomic_sub_fetch(&pw_armed_cqs, 1, __ATOMIC_RELAXED);
	*cq = which;
	*cq_context = which->cq_context;
	return 0;
}

EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

