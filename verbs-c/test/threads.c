/*
 * pagewire-verbs-threads: the verbs are thread-safe as libibverbs promises. Several threads post on
 * their own RC pairs at once: WRITEs whose completions all land in one shared send CQ that every thread
 * polls, and SEND/RECV on per-thread CQs; one more thread keeps registering and deregistering buffers
 * in the same context meanwhile. Each completion must arrive exactly once, successful, and every
 * WRITE's bytes must be at the peer. Against two Pagewire nodes (PAGEWIRE_NODE=A,B), bounded in time:
 *   pagewire-verbs-threads [THREADS [WRITES_PER_THREAD]]     # exit 0 and "ok threads" when all held
 * With "race": one thread keeps incrementing a word of a malloc'd page while another registers and
 * deregisters a neighbour on the same page; no increment may be lost to the library moving the page:
 *   pagewire-verbs-threads race [ROUNDS]                     # exit 0 and "ok race" when none was
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <infiniband/verbs.h>

#define MAX_THREADS 16
#define DEPTH 16
#define SLOT 256
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define DEADLINE_MS 90000

static int threads = 4;
static int writes = 2000;
static struct ibv_context *client_ctx, *server_ctx;
static struct ibv_pd *client_pd, *server_pd;
static struct ibv_cq *shared_cq; /* every client pair's send CQ */
static uint8_t *client_buf, *server_buf;
static struct ibv_mr *client_mr, *server_mr;
static uint64_t started_ms;
static int failures;
static volatile int stop_churn;
static pthread_mutex_t report = PTHREAD_MUTEX_INITIALIZER;

/* What each thread owns: its pairs, its receive CQs, and how many of its WRITEs are still unpolled. */
struct lane {
	int index;
	struct ibv_qp *client_qp, *server_qp;
	struct ibv_cq *client_recv_cq, *server_cq;
	int outstanding; /* atomic: posted and not yet polled by anyone */
};
static struct lane lanes[MAX_THREADS];
static uint8_t *seen; /* per WRITE (thread * writes + i): how many completions arrived for it; atomic */

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&report);
	printf("FAIL ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	failures++;
	pthread_mutex_unlock(&report);
	va_end(ap);
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *send_cq, struct ibv_cq *recv_cq)
{
	struct ibv_qp_init_attr init = {.send_cq = send_cq, .recv_cq = recv_cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = DEPTH * 2, .max_recv_wr = DEPTH * 2, .max_send_sge = 1, .max_recv_sge = 1}};
	return ibv_create_qp(pd, &init);
}

static uint16_t lid_of(struct ibv_context *ctx)
{
	struct ibv_port_attr port;
	return ibv_query_port(ctx, 1, &port) ? 0 : port.lid;
}

static int connect_one(struct ibv_qp *qp, struct ibv_qp *peer, uint16_t peer_lid)
{
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	struct ibv_qp_attr rtr = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp_num, .rq_psn = 0,
				  .max_dest_rd_atomic = 1, .min_rnr_timer = 1, .ah_attr = {.dlid = peer_lid, .port_num = 1}};
	struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .sq_psn = 0, .max_rd_atomic = 1};
	return ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
	       || ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
						  | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
	       || ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN
						  | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Polls the shared CQ once: whichever thread's completions it finds are counted for their owners. */
static void poll_shared(void)
{
	struct ibv_wc wc[8];
	int n = ibv_poll_cq(shared_cq, 8, wc);
	if (n < 0)
		fail("ibv_poll_cq on the shared CQ returned %d", n);
	for (int k = 0; k < n; k++) {
		uint64_t id = wc[k].wr_id;
		int t = (int)(id >> 32), i = (int)(uint32_t)id;
		if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_RDMA_WRITE || t >= threads || i >= writes) {
			fail("shared CQ: wr_id 0x%" PRIx64 " status %s opcode %d", id, ibv_wc_status_str(wc[k].status), wc[k].opcode);
			continue;
		}
		if (__atomic_add_fetch(&seen[(size_t)t * writes + i], 1, __ATOMIC_RELAXED) != 1)
			fail("WRITE %d of thread %d completed twice", i, t);
		__atomic_sub_fetch(&lanes[t].outstanding, 1, __ATOMIC_RELEASE);
	}
}

/* One SEND from the thread's server pair to its client pair: the receive completes on the client's own CQ. */
static void ping(struct lane *l, int i)
{
	uint8_t *from = server_buf + (size_t)(threads + l->index) * SLOT;
	uint8_t *into = client_buf + (size_t)(threads + l->index) * SLOT;
	memset(into, 0, 64);
	struct ibv_sge rsge = {.addr = (uintptr_t)into, .length = SLOT, .lkey = client_mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = (uint64_t)i, .sg_list = &rsge, .num_sge = 1}, *bad_r;
	if (ibv_post_recv(l->client_qp, &rwr, &bad_r)) {
		fail("thread %d: ibv_post_recv: %s", l->index, strerror(errno));
		return;
	}
	memset(from, 0x50 + l->index, 64);
	struct ibv_sge ssge = {.addr = (uintptr_t)from, .length = 64, .lkey = server_mr->lkey};
	struct ibv_send_wr swr = {.wr_id = (uint64_t)i, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad_s;
	if (ibv_post_send(l->server_qp, &swr, &bad_s)) {
		fail("thread %d: ibv_post_send of a SEND: %s", l->index, strerror(errno));
		return;
	}
	struct ibv_wc wc;
	int got_send = 0, got_recv = 0;
	while ((!got_send || !got_recv) && now_ms() - started_ms < DEADLINE_MS) {
		if (!got_send && ibv_poll_cq(l->server_cq, 1, &wc) > 0) {
			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
				fail("thread %d: the SEND completed %s opcode %d", l->index, ibv_wc_status_str(wc.status), wc.opcode);
			got_send = 1;
		}
		if (!got_recv && ibv_poll_cq(l->client_recv_cq, 1, &wc) > 0) {
			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != 64 || wc.wr_id != (uint64_t)i)
				fail("thread %d: the RECV completed %s opcode %d, %u bytes", l->index, ibv_wc_status_str(wc.status), wc.opcode,
				     wc.byte_len);
			got_recv = 1;
		}
		poll_shared();
	}
	if (!got_send || !got_recv) {
		fail("thread %d: SEND %d did not complete", l->index, i);
		return;
	}
	for (int k = 0; k < 64; k++) {
		if (into[k] != (uint8_t)(0x50 + l->index)) {
			fail("thread %d: SEND %d delivered other bytes", l->index, i);
			break;
		}
	}
}

static void *worker(void *arg)
{
	struct lane *l = arg;
	for (int i = 0; i < writes && now_ms() - started_ms < DEADLINE_MS; i++) {
		while (__atomic_load_n(&l->outstanding, __ATOMIC_ACQUIRE) >= DEPTH && now_ms() - started_ms < DEADLINE_MS)
			poll_shared();
		uint8_t *src = client_buf + (size_t)l->index * SLOT;
		uint32_t stamp = ((uint32_t)l->index << 24) | (uint32_t)i;
		memcpy(src, &stamp, sizeof(stamp));
		struct ibv_sge sge = {.addr = (uintptr_t)src, .length = sizeof(stamp), .lkey = client_mr->lkey};
		struct ibv_send_wr wr = {.wr_id = ((uint64_t)l->index << 32) | (uint32_t)i, .sg_list = &sge, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
					 .wr.rdma = {.remote_addr = (uintptr_t)(server_buf + (size_t)l->index * SLOT), .rkey = server_mr->rkey}},
				   *bad;
		__atomic_add_fetch(&l->outstanding, 1, __ATOMIC_RELEASE);
		if (ibv_post_send(l->client_qp, &wr, &bad)) {
			fail("thread %d: ibv_post_send of WRITE %d: %s", l->index, i, strerror(errno));
			__atomic_sub_fetch(&l->outstanding, 1, __ATOMIC_RELEASE);
			break;
		}
		if (i % 50 == 0)
			ping(l, i);
		poll_shared();
	}
	while (__atomic_load_n(&l->outstanding, __ATOMIC_ACQUIRE) > 0 && now_ms() - started_ms < DEADLINE_MS)
		poll_shared();
	return NULL;
}

/* Registrations come and go in the same context while the others post and poll. */
static void *churn(void *arg)
{
	(void)arg;
	int rounds = 0;
	while (!__atomic_load_n(&stop_churn, __ATOMIC_ACQUIRE)) {
		size_t size = 4096 * (size_t)(1 + rounds % 8);
		void *p = malloc(size);
		struct ibv_mr *mr = p ? ibv_reg_mr(client_pd, p, size, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (!mr)
			fail("churn: ibv_reg_mr: %s", strerror(errno));
		else if (ibv_dereg_mr(mr))
			fail("churn: ibv_dereg_mr failed");
		free(p);
		rounds++;
	}
	printf("churn: %d registrations made and dropped meanwhile\n", rounds);
	return NULL;
}

static volatile uint64_t *race_word;
static volatile int race_over;
static uint64_t race_increments;

static void *increment(void *arg)
{
	(void)arg;
	uint64_t n = 0;
	while (!race_over) {
		(*race_word)++; /* one writer: a lost increment is a store the library lost */
		n++;
	}
	race_increments = n;
	return NULL;
}

static int race(struct ibv_device *device, int rounds)
{
	struct ibv_context *ctx = ibv_open_device(device);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	uint8_t *page = aligned_alloc(4096, 4096);
	if (!pd || !page) {
		printf("FAIL race set-up: %s\n", strerror(errno));
		return 1;
	}
	race_word = (volatile uint64_t *)(page + 64);
	*race_word = 0;
	pthread_t writer;
	pthread_create(&writer, NULL, increment, NULL);
	int done = 0;
	for (; done < rounds && now_ms() - started_ms < DEADLINE_MS; done++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, page + 1024, 256, IBV_ACCESS_LOCAL_WRITE);
		if (!mr) {
			fail("race: ibv_reg_mr: %s", strerror(errno));
			break;
		}
		if (ibv_dereg_mr(mr))
			fail("race: ibv_dereg_mr failed");
	}
	race_over = 1;
	pthread_join(writer, NULL);
	uint64_t lost = race_increments - *race_word;
	printf("%d registrations and deregistrations beside %" PRIu64 " increments: %" PRIu64 " lost\n", done, race_increments, lost);
	if (lost)
		fail("race: %" PRIu64 " stores to the page were lost while the library moved it", lost);
	free(page);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("%s\n", failures ? "FAILED" : "ok race");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "race")) {
		int n = 0;
		struct ibv_device **devices = ibv_get_device_list(&n);
		if (!devices || n < 1) {
			printf("FAIL no device\n");
			return 1;
		}
		started_ms = now_ms();
		int e = race(devices[0], argc > 2 ? atoi(argv[2]) : 1000);
		ibv_free_device_list(devices);
		return e;
	}
	if (argc > 1)
		threads = atoi(argv[1]);
	if (argc > 2)
		writes = atoi(argv[2]);
	if (threads < 1 || threads > MAX_THREADS || writes < 1) {
		fprintf(stderr, "usage: %s [THREADS (1-%d) [WRITES_PER_THREAD]]\n", argv[0], MAX_THREADS);
		return 2;
	}
	int n = 0;
	struct ibv_device **devices = ibv_get_device_list(&n);
	if (!devices || n < 2) {
		printf("FAIL two devices are needed (PAGEWIRE_NODE=A,B), found %d\n", n);
		return 1;
	}
	client_ctx = ibv_open_device(devices[0]);
	server_ctx = ibv_open_device(devices[1]);
	if (!client_ctx || !server_ctx) {
		printf("FAIL open: %s\n", strerror(errno));
		return 1;
	}
	client_pd = ibv_alloc_pd(client_ctx);
	server_pd = ibv_alloc_pd(server_ctx);
	size_t bytes = (size_t)2 * MAX_THREADS * SLOT;
	client_buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	server_buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	client_mr = ibv_reg_mr(client_pd, client_buf, bytes, ACCESS);
	server_mr = ibv_reg_mr(server_pd, server_buf, bytes, ACCESS);
	shared_cq = ibv_create_cq(client_ctx, threads * DEPTH * 2, NULL, NULL, 0);
	seen = calloc((size_t)threads * writes, 1);
	if (!client_pd || !server_pd || !client_mr || !server_mr || !shared_cq || !seen) {
		printf("FAIL set-up: %s\n", strerror(errno));
		return 1;
	}
	uint16_t client_lid = lid_of(client_ctx), server_lid = lid_of(server_ctx);
	for (int t = 0; t < threads; t++) {
		struct lane *l = &lanes[t];
		l->index = t;
		l->client_recv_cq = ibv_create_cq(client_ctx, DEPTH * 2, NULL, NULL, 0);
		l->server_cq = ibv_create_cq(server_ctx, DEPTH * 4, NULL, NULL, 0);
		l->client_qp = l->client_recv_cq ? make_qp(client_pd, shared_cq, l->client_recv_cq) : NULL;
		l->server_qp = l->server_cq ? make_qp(server_pd, l->server_cq, l->server_cq) : NULL;
		if (!l->client_qp || !l->server_qp || connect_one(l->client_qp, l->server_qp, server_lid)
		    || connect_one(l->server_qp, l->client_qp, client_lid)) {
			printf("FAIL set-up of thread %d's pairs: %s\n", t, strerror(errno));
			return 1;
		}
	}
	printf("pagewire-verbs-threads: %d threads, %d WRITEs each on one shared CQ, a SEND every 50, registrations churning\n", threads,
	       writes);
	fflush(stdout);
	started_ms = now_ms();
	pthread_t workers[MAX_THREADS], churner;
	pthread_create(&churner, NULL, churn, NULL);
	for (int t = 0; t < threads; t++)
		pthread_create(&workers[t], NULL, worker, &lanes[t]);
	for (int t = 0; t < threads; t++)
		pthread_join(workers[t], NULL);
	__atomic_store_n(&stop_churn, 1, __ATOMIC_RELEASE);
	pthread_join(churner, NULL);
	if (now_ms() - started_ms >= DEADLINE_MS)
		fail("not done within %d s", DEADLINE_MS / 1000);
	size_t missing = 0;
	for (size_t k = 0; k < (size_t)threads * writes; k++)
		missing += seen[k] == 0;
	if (missing)
		fail("%zu WRITEs never completed", missing);
	for (int t = 0; t < threads; t++) {
		uint32_t last;
		memcpy(&last, server_buf + (size_t)t * SLOT, sizeof(last));
		if (last != (((uint32_t)t << 24) | (uint32_t)(writes - 1)))
			fail("thread %d's last WRITE is not at the peer (0x%08x there)", t, last);
	}
	printf("%d WRITEs in %.1f s\n", threads * writes, (double)(now_ms() - started_ms) / 1000.0);
	for (int t = 0; t < threads; t++) {
		ibv_destroy_qp(lanes[t].client_qp);
		ibv_destroy_qp(lanes[t].server_qp);
		ibv_destroy_cq(lanes[t].client_recv_cq);
		ibv_destroy_cq(lanes[t].server_cq);
	}
	ibv_destroy_cq(shared_cq);
	ibv_dereg_mr(client_mr);
	ibv_dereg_mr(server_mr);
	ibv_dealloc_pd(client_pd);
	ibv_dealloc_pd(server_pd);
	ibv_close_device(client_ctx);
	ibv_close_device(server_ctx);
	ibv_free_device_list(devices);
	free(seen);
	printf("%s\n", failures ? "FAILED" : "ok threads");
	return failures ? 1 : 0;
}
