/*
 * Completion queues and channels: a CQ holds the completions the reader or a poller drained from the
 * event ring (events.c puts them there), cqe of them; polling (ibv_poll_cq, and the extended
 * ibv_start_poll / ibv_next_poll / ibv_read_* of a CQ from ibv_create_cq_ex), arming (next or
 * solicited) and channel events.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"
#include "cq.h"
#include "events.h"
#include "ring.h"
#include "settings.h"
#include "trace.h"

/* The work completion fields an extended CQ can report (the node stamps each completion with its time). */
#define SUPPORTED_WC_FLAGS                                                                                                       \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID           \
	 | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP                                  \
	 | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

static uint64_t now_ns(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
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
	if (__atomic_load_n(&channel->refcnt, __ATOMIC_ACQUIRE))
		return EBUSY;
	close(ch->channel.fd);
	close(ch->write_fd);
	free(ch);
	return 0;
}

static struct pw_cq *new_cq(struct ibv_context *context, uint32_t cqe, void *cq_context, struct ibv_comp_channel *channel,
			    uint32_t comp_vector)
{
	if (cqe < 1 || cqe > PW_MAX_CQE || comp_vector >= (uint32_t)context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	struct pw_cq *cq = calloc(1, sizeof(*cq));
	if (cq)
		cq->queue.entries = calloc(cqe, sizeof(struct pw_cqe));
	if (!cq || !cq->queue.entries) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->queue.capacity = (int)cqe;
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = (int)cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	if (channel)
		__atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
	return cq;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
				    int comp_vector)
{
	if (cqe < 1 || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	struct pw_cq *cq = new_cq(context, (uint32_t)cqe, cq_context, channel, (uint32_t)comp_vector);
	return cq ? &cq->cq : NULL;
}

/*
 * ibv_resize_cq: to at least as many entries as the CQ holds now, as Soft-RoCE requires. What the node has
 * written to the event ring is in the CQ already (an HCA's CQEs are in the CQ's buffer), so it is drained first.
 */
EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (cqe < 1 || cqe > PW_MAX_CQE)
		return EINVAL;
	pw_drain_all(pw_ctx(ibcq->context));
	pthread_mutex_lock(&cq->lock);
	struct pw_wc_queue *q = &cq->queue;
	if (cqe < q->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	struct pw_cqe *entries = calloc((size_t)cqe, sizeof(*entries));
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

/* ibv_destroy_cq: EBUSY while a queue pair still completes into it, as libibverbs' use count says. */
EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (__atomic_load_n(&cq->users, __ATOMIC_ACQUIRE) > 0)
		return EBUSY;
	pthread_mutex_lock(&cq->lock);
	int armed = cq->armed;
	pthread_mutex_unlock(&cq->lock);
	if (armed)
		__atomic_sub_fetch(&pw_armed_cqs, 1, __ATOMIC_RELAXED);
	if (ibcq->channel)
		__atomic_sub_fetch(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
	pthread_mutex_destroy(&cq->lock);
	free(cq->queue.entries);
	free(cq);
	return 0;
}

/* Whether the CQ holds fewer than `wanted` completions (a hint, read without its lock: a drain may follow). */
static int short_of(struct pw_cq *cq, int wanted)
{
	return __atomic_load_n(&cq->queue.count, __ATOMIC_RELAXED) < wanted;
}

/*
 * An empty poll. The NIC is the node's threads, on the same cores as the program: a program that polls
 * without end would hold a core the NIC needs. So once a CQ has polled empty for PAGEWIRE_VERBS_SPIN_US
 * (3 us by default), each further empty poll of it yields the core. Once every CQ of the context has
 * polled empty for as long as twice its recent waits took (sleep_after: at least PAGEWIRE_VERBS_SLEEP_AFTER_US,
 * 100 us by default, at most PAGEWIRE_VERBS_SLEEP_AFTER_MAX_US, 1 ms), an empty poll sleeps on the
 * context's bell instead, which the node rings when it writes an event for a program that said it sleeps
 * (the ring header's "application asleep" word), for at most PAGEWIRE_VERBS_SLEEP_US (1 ms by default; 0
 * never sleeps). Why the threshold follows the waits: a sleeper pays a wake-up, which makes its next wait
 * longer, so a fixed threshold below a program's round trip makes every wait of a ping-pong sleep (UCX's
 * tag_lat slept in 75 % of its waits at 100 us); a wait that is longer than the program's recent ones
 * (a rank at a barrier, a progress loop with nothing to do) still ends in a sleep and gives the core up.
 * The yield's clock is the CQ's, as a progress loop that polls an idle CQ beside a busy one (UCX's UD CQs
 * beside its RC ones) gives the core away on the idle one; the sleep's is the context's, so that loop
 * never sleeps on the idle CQ while the other delivers.
 */
/* How long the context's CQs poll empty before a poll sleeps: twice the recent waits, within the settings' bounds. */
static int64_t sleep_after(struct pw_context *ctx, const struct pw_settings *settings)
{
	int64_t twice = 2 * (int64_t)__atomic_load_n(&ctx->wait_average_ns, __ATOMIC_RELAXED);
	if (twice < settings->sleep_after_ns)
		return settings->sleep_after_ns;
	return twice > settings->sleep_after_max_ns ? settings->sleep_after_max_ns : twice;
}

static void idle_poll(struct pw_cq *cq)
{
	struct pw_context *ctx = pw_ctx(cq->cq.context);
	const struct pw_settings *settings = pw_settings();
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	uint64_t cq_since = __atomic_load_n(&cq->empty_since_ns, __ATOMIC_RELAXED);
	uint64_t since = __atomic_load_n(&ctx->polls_empty_since_ns, __ATOMIC_RELAXED);
	if (since == 0) {
		__atomic_store_n(&ctx->delivered_seen, __atomic_load_n(&ctx->delivered, __ATOMIC_SEQ_CST), __ATOMIC_RELAXED);
		__atomic_store_n(&ctx->polls_empty_since_ns, now, __ATOMIC_RELAXED);
	}
	if (cq_since == 0) {
		__atomic_store_n(&cq->empty_since_ns, now, __ATOMIC_RELAXED);
		return;
	}
	if ((int64_t)(now - cq_since) < settings->spin_ns)
		return;
	if (since == 0 || (int64_t)(now - since) < sleep_after(ctx, settings) || ctx->bell_fd < 0 || !ctx->rings_base
	    || settings->sleep_us == 0) {
		sched_yield();
		return;
	}
	/* Counted first: while anyone sleeps here the reader thread leaves the bell's bytes to the sleepers. */
	__atomic_add_fetch(&ctx->bell_sleepers, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(pw_ring_word(ctx, PW_RINGS_APP_ASLEEP), 1, __ATOMIC_SEQ_CST);
	/* Drained (by the reader thread or another poller) into any of the context's CQs since the polls began to find nothing? */
	int delivered = __atomic_load_n(&ctx->delivered, __ATOMIC_SEQ_CST) != __atomic_load_n(&ctx->delivered_seen, __ATOMIC_RELAXED);
	if (delivered) {
		__atomic_store_n(&ctx->polls_empty_since_ns, 0, __ATOMIC_RELAXED);
	} else if (!pw_ring_pending(&ctx->events)) {
		/* Nothing came before the node could see the word: whatever comes now rings the bell. */
		struct pollfd bell = { .fd = ctx->bell_fd, .events = POLLIN };
		struct timespec limit = { .tv_sec = 0, .tv_nsec = (long)settings->sleep_us * 1000 };
		pw_trace_mark(PW_HOP_POLL_SLEEP);
		if (ppoll(&bell, 1, &limit, NULL) > 0 && (bell.revents & POLLIN)) {
			pw_trace_mark(PW_HOP_POLL_WAKE);
			char sink[64];
			(void)!recv(ctx->bell_fd, sink, sizeof(sink), MSG_DONTWAIT);
			__atomic_add_fetch(&ctx->poll_wakes, 1, __ATOMIC_RELAXED);
		}
		__atomic_add_fetch(&ctx->poll_sleeps, 1, __ATOMIC_RELAXED);
	}
	__atomic_sub_fetch(&ctx->bell_sleepers, 1, __ATOMIC_SEQ_CST);
}

/*
 * A poll found completions: the CQ spins again, and so does the context; the empty period it ends counts
 * into the context's average of recent waits, which follows the longer ones: half the way up, an eighth of
 * the way down, so the short waits of a progress loop's send completions between a ping-pong's long
 * waits for the answer do not pull it below them. A wait counts as no more than the longest threshold.
 */
static void busy_poll(struct pw_cq *cq)
{
	struct pw_context *ctx = pw_ctx(cq->cq.context);
	pw_trace_mark(PW_HOP_POLL_COMPLETION);
	__atomic_store_n(&cq->empty_since_ns, 0, __ATOMIC_RELAXED);
	uint64_t since = __atomic_load_n(&ctx->polls_empty_since_ns, __ATOMIC_RELAXED);
	if (since) {
		__atomic_store_n(&ctx->polls_empty_since_ns, 0, __ATOMIC_RELAXED);
		int64_t waited = (int64_t)(now_ns(CLOCK_MONOTONIC) - since);
		int64_t most = pw_settings()->sleep_after_max_ns;
		waited = waited > most ? most : waited; /* a long idle spell counts as the longest wait that matters */
		int64_t average = (int64_t)__atomic_load_n(&ctx->wait_average_ns, __ATOMIC_RELAXED);
		if (waited > 0)
			__atomic_store_n(&ctx->wait_average_ns, (uint64_t)(average + (waited - average) / (waited > average ? 2 : 8)),
					 __ATOMIC_RELAXED);
	}
}

int pw_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct pw_cq *cq = (struct pw_cq *)ibcq;
	if (num_entries < 0)
		return -1;
	if (short_of(cq, num_entries))
		pw_drain(pw_ctx(ibcq->context));
	pthread_mutex_lock(&cq->lock);
	int n = 0;
	struct pw_wc_queue *q = &cq->queue;
	while (n < num_entries && q->count > 0) {
		wc[n++] = q->entries[q->head].wc;
		q->head = (q->head + 1) % q->capacity;
		q->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	if (n == 0)
		idle_poll(cq);
	else
		busy_poll(cq);
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

/* ---- the extended CQ: ibv_create_cq_ex and the poll-ex calls --------------------------------------- */

static inline struct pw_cq *cq_of_ex(struct ibv_cq_ex *ibcq) { return (struct pw_cq *)ibcq; }

/* Takes the oldest completion as the current one (lock held); ENOENT when there is none. */
static int take_current(struct pw_cq *cq)
{
	struct pw_wc_queue *q = &cq->queue;
	if (q->count == 0)
		return ENOENT;
	cq->current = q->entries[q->head];
	q->head = (q->head + 1) % q->capacity;
	q->count--;
	cq->cq_ex.status = cq->current.wc.status;
	cq->cq_ex.wr_id = cq->current.wc.wr_id;
	return 0;
}

/* ibv_start_poll: drains the event ring, then holds the CQ until ibv_end_poll (unless there is nothing: ENOENT, no end_poll). */
static int cqx_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	struct pw_cq *cq = cq_of_ex(ibcq);
	if (attr->comp_mask)
		return EINVAL;
	if (short_of(cq, 1))
		pw_drain(pw_ctx(ibcq->context));
	pthread_mutex_lock(&cq->lock);
	int e = take_current(cq);
	if (e) {
		pthread_mutex_unlock(&cq->lock);
		idle_poll(cq);
		return e;
	}
	busy_poll(cq);
	return 0;
}

static int cqx_next_poll(struct ibv_cq_ex *ibcq)
{
	return take_current(cq_of_ex(ibcq));
}

static void cqx_end_poll(struct ibv_cq_ex *ibcq)
{
	pthread_mutex_unlock(&cq_of_ex(ibcq)->lock);
}

static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.opcode; }
static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.vendor_err; }
static uint32_t cqx_read_byte_len(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.byte_len; }
static __be32 cqx_read_imm_data(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.imm_data; }
static uint32_t cqx_read_qp_num(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.qp_num; }
static uint32_t cqx_read_src_qp(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.src_qp; }
static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.wc_flags; }
static uint32_t cqx_read_slid(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.slid; }
static uint8_t cqx_read_sl(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.sl; }
static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.wc.dlid_path_bits; }

/* In the device's clock: nanoseconds of CLOCK_MONOTONIC (hca_core_clock 1 GHz), when the node handed the completion over. */
static uint64_t cqx_read_completion_ts(struct ibv_cq_ex *ibcq) { return cq_of_ex(ibcq)->current.time_ns; }

/* The same instant on the wall clock. */
static uint64_t cqx_read_completion_wallclock_ns(struct ibv_cq_ex *ibcq)
{
	uint64_t offset = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_MONOTONIC);
	return cq_of_ex(ibcq)->current.time_ns + offset;
}

struct ibv_cq_ex *pw_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->wc_flags & ~(uint64_t)SUPPORTED_WC_FLAGS) {
		pw_log(PW_WARN, "ibv_create_cq_ex: work completion fields 0x%llx are not reported",
		       (unsigned long long)(attr->wc_flags & ~(uint64_t)SUPPORTED_WC_FLAGS));
		errno = EOPNOTSUPP;
		return NULL;
	}
	uint32_t flags = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) ? attr->flags : 0;
	if (flags & ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct pw_cq *cq = new_cq(context, attr->cqe, attr->cq_context, attr->channel, attr->comp_vector);
	if (!cq)
		return NULL;
	cq->ignore_overrun = (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) != 0;
	struct ibv_cq_ex *x = &cq->cq_ex;
	x->start_poll = cqx_start_poll;
	x->next_poll = cqx_next_poll;
	x->end_poll = cqx_end_poll;
	x->read_opcode = cqx_read_opcode;
	x->read_vendor_err = cqx_read_vendor_err;
	x->read_wc_flags = cqx_read_wc_flags;
	/* Only the fields asked for are readable, as a provider leaves the others unset. */
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		x->read_byte_len = cqx_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		x->read_imm_data = cqx_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		x->read_qp_num = cqx_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		x->read_src_qp = cqx_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		x->read_slid = cqx_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		x->read_sl = cqx_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		x->read_dlid_path_bits = cqx_read_dlid_path_bits;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		x->read_completion_ts = cqx_read_completion_ts;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		x->read_completion_wallclock_ns = cqx_read_completion_wallclock_ns;
	return x;
}
