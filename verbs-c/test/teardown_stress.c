/*
 * pagewire-verbs-teardown: registrations of small malloc'd buffers (sharing pages with each other and
 * with the heap's own bookkeeping), with bytes written into them and their neighbours, torn down in
 * random orders: deregistration before or after destroying queue pairs and completion queues, a device
 * closed with registrations still open, buffers freed before they are deregistered, the same page
 * registered twice in one protection domain and in two. Several threads do it at once, each on its
 * own context. Every neighbour must keep its bytes and the heap must stay whole (glibc aborts on a
 * corrupt chunk; ASan reports it). The program hooks mremap as UCX 1.13 does (its hook passes four
 * arguments on, so a fixed-address remap gets a NULL address): the library must not depend on it. Run on a Pagewire node (PAGEWIRE_NODE) or any verbs device:
 *   pagewire-verbs-teardown [SECONDS [SEED [THREADS]]]      # prints its seed; exit 0 when nothing broke
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* A memory hook as UCX 1.13's UCM installs it: mremap with four arguments, the fifth (new address) lost. */
void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...)
{
	long r = syscall(SYS_mremap, old_address, old_size, new_size, flags, NULL);
	return r == -1 ? MAP_FAILED : (void *)r;
}

#define SLOTS 24

static struct ibv_device *device;
static double seconds = 5;
static int failures;
static pthread_mutex_t report = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, int round)
{
	pthread_mutex_lock(&report);
	printf("FAIL round %d: %s\n", round, what);
	fflush(stdout);
	failures++;
	pthread_mutex_unlock(&report);
}

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

struct slot {
	uint8_t *buf;
	size_t size;
	uint8_t fill;
	struct ibv_mr *mr;
	struct ibv_mr *again;  /* a second registration of the same bytes (same PD or the other) */
	int freed;
};

static void check_bytes(struct slot *s, int round)
{
	if (s->freed)
		return;
	for (size_t i = 0; i < s->size; i++) {
		if (s->buf[i] != s->fill) {
			fail("a malloc'd buffer lost its bytes across registrations of its neighbours", round);
			return;
		}
	}
}

static void *worker(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg;
	double end = now() + seconds;
	for (int round = 0; now() < end; round++) {
		struct ibv_context *ctx = ibv_open_device(device);
		if (!ctx) {
			fail("cannot open the device", round);
			return NULL;
		}
		struct ibv_pd *pds[2] = { ibv_alloc_pd(ctx), ibv_alloc_pd(ctx) };
		struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
						 .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *qp = pds[0] && cq ? ibv_create_qp(pds[0], &init) : NULL;
		if (!pds[0] || !pds[1] || !cq || !qp) {
			fail("cannot make a protection domain, queue or queue pair", round);
			return NULL;
		}
		struct slot slots[SLOTS];
		for (int i = 0; i < SLOTS; i++) {
			size_t size = 1 + next(&x) % (next(&x) % 4 == 0 ? 9000 : 200);
			size_t align = (size_t)8 << (next(&x) % 6);
			slots[i].buf = next(&x) % 3 == 0 ? aligned_alloc(align, (size + align - 1) / align * align) : malloc(size);
			slots[i].size = size;
			slots[i].fill = (uint8_t)next(&x);
			slots[i].freed = 0;
			slots[i].again = NULL;
			memset(slots[i].buf, slots[i].fill, size);
			int access = IBV_ACCESS_LOCAL_WRITE | (next(&x) % 2 ? IBV_ACCESS_REMOTE_WRITE : 0);
			slots[i].mr = ibv_reg_mr(pds[next(&x) % 2], slots[i].buf, size, access);
			if (!slots[i].mr)
				fail("cannot register a malloc'd buffer", round);
			if (slots[i].mr && next(&x) % 5 == 0)
				slots[i].again = ibv_reg_mr(pds[next(&x) % 2], slots[i].buf, size, IBV_ACCESS_LOCAL_WRITE);
		}
		/* The heap is used meanwhile, as a program's other threads would use it. */
		for (int i = 0; i < 64; i++) {
			void *p = malloc(1 + next(&x) % 512);
			memset(p, 0x5a, 1);
			free(p);
		}
		for (int i = 0; i < SLOTS; i++)
			check_bytes(&slots[i], round);
		int order = (int)(next(&x) % 4);
		if (order == 0) {
			ibv_destroy_qp(qp);
			ibv_destroy_cq(cq);
			qp = NULL;
			cq = NULL;
		}
		for (int n = 0; n < SLOTS; n++) {
			int i = (int)((n * 7 + order) % SLOTS);
			if (next(&x) % 6 == 0) {
				/* freed while registered: its bytes are the heap's again (the program's own business) */
				free(slots[i].buf);
				slots[i].freed = 1;
			}
			if (order == 3 && n == SLOTS / 2)
				break; /* the rest go with the device */
			if (slots[i].again)
				ibv_dereg_mr(slots[i].again);
			slots[i].again = NULL;
			if (slots[i].mr && ibv_dereg_mr(slots[i].mr))
				fail("deregistration failed", round);
			slots[i].mr = NULL;
			for (int j = 0; j < SLOTS; j++)
				check_bytes(&slots[j], round);
		}
		if (qp)
			ibv_destroy_qp(qp);
		if (cq)
			ibv_destroy_cq(cq);
		if (order != 3) {
			ibv_dealloc_pd(pds[0]);
			ibv_dealloc_pd(pds[1]);
		}
		ibv_close_device(ctx);
		for (int i = 0; i < SLOTS; i++) {
			check_bytes(&slots[i], round);
			if (!slots[i].freed)
				free(slots[i].buf);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		seconds = atof(argv[1]);
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL) * 2654435761u;
	int threads = argc > 3 ? atoi(argv[3]) : 3;
	printf("pagewire-verbs-teardown: seed %" PRIu64 ", %d threads, %.0f s (replay: %s %.0f %" PRIu64 " %d)\n", seed, threads, seconds,
	       argv[0], seconds, seed, threads);
	fflush(stdout);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		printf("FAIL no verbs device\n");
		return 1;
	}
	device = list[0];
	pthread_t t[16];
	if (threads > 16)
		threads = 16;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(seed + (uint64_t)i * 0x9E3779B97F4A7C15ull + 1));
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	ibv_free_device_list(list);
	printf("%s\n", failures ? "FAILED" : "ok teardown");
	return failures ? 1 : 0;
}
