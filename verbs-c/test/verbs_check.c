/*
 * pagewire-verbs-check: what a verbs program may rely on, checked against two Pagewire nodes from one
 * process (PAGEWIRE_NODE=A,B gives devices pagewire0 and pagewire1, and a queue pair on each is
 * connected to the other). Prints "ok NAME" or "FAIL NAME: why" per check; exits 1 if any failed.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int failures;
#define CHECK(name, cond, ...) do { if (cond) printf("ok %s\n", name); else { printf("FAIL %s: ", name); printf(__VA_ARGS__); printf("\n"); failures++; } fflush(stdout); } while (0)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
	size_t size;
	struct ibv_mr *mr;
	uint16_t lid;
};

static void open_side(struct side *s, struct ibv_device *dev, size_t size)
{
	s->ctx = ibv_open_device(dev);
	if (!s->ctx) {
		printf("FAIL open %s: %s\n", ibv_get_device_name(dev), strerror(errno));
		exit(1);
	}
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	s->size = size;
	s->buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(s->buf, 0x11, size);
	s->mr = ibv_reg_mr(s->pd, s->buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
			   | IBV_ACCESS_REMOTE_ATOMIC);
	if (!s->mr) {
		printf("FAIL register: %s\n", strerror(errno));
		exit(1);
	}
	struct ibv_qp_init_attr init = { .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 4, .max_recv_sge = 1,
						  .max_inline_data = 128 } };
	s->qp = ibv_create_qp(s->pd, &init);
	struct ibv_port_attr port;
	ibv_query_port(s->ctx, 1, &port);
	s->lid = port.lid;
}

static int to_init(struct side *s)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rts(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = peer->qp->qp_num, .rq_psn = 1,
				 .max_dest_rd_atomic = 1, .min_rnr_timer = 12, .ah_attr = { .dlid = peer->lid, .port_num = 1 } };
	int e = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
				  | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (e)
		return e;
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .sq_psn = 1, .max_rd_atomic = 1 };
	return ibv_modify_qp(s->qp, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN
				 | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Polls one completion (10 s at most). */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	time_t until = time(NULL) + 10;
	while (time(NULL) < until) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
	}
	return -1;
}

static int post(struct side *s, enum ibv_wr_opcode op, struct ibv_sge *sge, int nsge, uint64_t remote, uint32_t rkey, int flags)
{
	struct ibv_send_wr wr = { .wr_id = 42, .sg_list = sge, .num_sge = nsge, .opcode = op, .send_flags = IBV_SEND_SIGNALED | flags,
				  .wr.rdma = { .remote_addr = remote, .rkey = rkey } }, *bad;
	return ibv_post_send(s->qp, &wr, &bad);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i += 4096)
		memset(p + i, (uint8_t)(seed + i / 4096), 4096);
}

static size_t wrong_pages(const uint8_t *p, size_t n, uint8_t seed)
{
	size_t wrong = 0;
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != (uint8_t)(seed + i / 4096) || p[i + 4095] != (uint8_t)(seed + i / 4096))
			wrong++;
	return wrong;
}

/*
 * Paging (run against a node with less memory than the program registers): ON_DEMAND buffers larger
 * together than the node's memory, so the kernel agent takes pages back from the program; the
 * program's own touch brings them in again with their bytes, the NIC's too, and MADV_DONTNEED drops them.
 */
static int paging(struct ibv_device **devs, size_t size)
{
	struct side a, b;
	open_side(&a, devs[0], 1 << 16);
	open_side(&b, devs[1], 1 << 16);
	CHECK("connect", !to_init(&a) && !to_init(&b) && !to_rts(&a, &b) && !to_rts(&b, &a), "the queue pairs could not be connected");
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;
	uint8_t *x = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *y = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(x, size, 1);
	struct ibv_mr *xmr = ibv_reg_mr(a.pd, x, size, access);
	CHECK("register-x", xmr != NULL, "%s", strerror(errno));
	fill(x, size, 3); /* the program's stores after registration, into the node's frames */
	struct ibv_mr *ymr = ibv_reg_mr(a.pd, y, size, access);
	CHECK("register-y-beyond-memory", ymr != NULL, "%s", strerror(errno));
	fill(y, size, 5);
	size_t wrong = wrong_pages(x, size, 3);
	CHECK("touch-brings-pages-back", wrong == 0, "%zu of %zu pages of x read wrong after the node took them", wrong, size / 4096);
	wrong = wrong_pages(y, size, 5);
	CHECK("both-buffers-intact", wrong == 0, "%zu pages of y read wrong", wrong);
	/* the NIC reads every page of y (the node faults in those it took), into b's buffer 64 KiB at a time */
	size_t nic_wrong = 0;
	struct ibv_wc wc;
	for (size_t at = 0; at < size && xmr && ymr; at += 1 << 16) {
		struct ibv_sge sge = { (uintptr_t)b.buf, 1 << 16, b.mr->lkey };
		int e = post(&b, IBV_WR_RDMA_READ, &sge, 1, (uintptr_t)y + at, ymr->rkey, 0);
		if (e || wait_wc(b.cq, &wc) || wc.status != IBV_WC_SUCCESS) {
			nic_wrong++;
			printf("read at %zu: post %d status %s\n", at, e, ibv_wc_status_str(wc.status));
			break;
		}
		for (size_t i = 0; i < (1 << 16); i += 4096)
			if (b.buf[i] != (uint8_t)(5 + (at + i) / 4096))
				nic_wrong++;
	}
	CHECK("nic-reads-pages-back", nic_wrong == 0, "%zu pages read by the NIC were wrong", nic_wrong);
	/* MADV_DONTNEED: the program and the NIC see zeros, and what follows stays */
	int m = madvise(x, 8 * 4096, MADV_DONTNEED);
	struct ibv_sge sge = { (uintptr_t)b.buf, 4096, b.mr->lkey };
	int e = xmr ? post(&b, IBV_WR_RDMA_READ, &sge, 1, (uintptr_t)x + 4096, xmr->rkey, 0) : -1;
	int read_ok = !e && !wait_wc(b.cq, &wc) && wc.status == IBV_WC_SUCCESS;
	CHECK("dontneed-drops-pages", m == 0 && x[0] == 0 && x[8 * 4096 - 1] == 0 && x[8 * 4096] == (uint8_t)(3 + 8) && read_ok
	      && b.buf[0] == 0 && b.buf[4095] == 0, "madvise %d, program reads %02x %02x %02x, NIC read %d reads %02x", m, x[0],
	      x[8 * 4096 - 1], x[8 * 4096], read_ok, b.buf[0]);
	x[100] = 9;
	CHECK("dontneed-page-writable", x[100] == 9, "a store after MADV_DONTNEED was lost");
	if (ymr)
		ibv_dereg_mr(ymr);
	if (xmr)
		ibv_dereg_mr(xmr);
	wrong = wrong_pages(y, size, 5);
	CHECK("dereg-after-paging-keeps-bytes", wrong == 0, "%zu pages of y wrong after deregistration", wrong);
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}

/*
 * Paging inside a program that does what programs do: its own SIGSEGV handler installed after the
 * device is opened (a JVM, Python's faulthandler, a crash reporter), heap pages registered (small
 * malloc'd buffers) that the node takes back while malloc works on them, and fork: a child that
 * mallocs and writes registered bytes, system() and popen(). Run against a node with less memory than
 * the program registers (as "paging").
 */
static sigjmp_buf own_jump;
static volatile sig_atomic_t own_faults;

static void own_handler(int signo, siginfo_t *info, void *uc)
{
	(void)signo;
	(void)info;
	(void)uc;
	own_faults++;
	siglongjmp(own_jump, 1);
}

static int harsh(struct ibv_device **devs, size_t size)
{
	struct side a;
	open_side(&a, devs[0], 1 << 16);
	/* The program's own handler, installed after the library's. */
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	CHECK("own-handler-installed", sigaction(SIGSEGV, &sa, &old) == 0, "%s", strerror(errno));
	struct sigaction now;
	sigaction(SIGSEGV, NULL, &now);
	CHECK("own-handler-is-what-sigaction-says", now.sa_sigaction == own_handler, "sigaction reports another handler");
	/* Heap pages registered: 1,500 small blocks of 3,000 bytes, and an ON_DEMAND region over them. */
	enum { BLOCKS = 1500, BLOCK = 3000 };
	static uint8_t *blocks[BLOCKS];
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < BLOCKS; i++) {
		blocks[i] = malloc(BLOCK);
		memset(blocks[i], (uint8_t)i, BLOCK);
		if ((uintptr_t)blocks[i] < lo)
			lo = (uintptr_t)blocks[i];
		if ((uintptr_t)blocks[i] + BLOCK > hi)
			hi = (uintptr_t)blocks[i] + BLOCK;
	}
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;
	struct ibv_mr *heap = ibv_reg_mr(a.pd, (void *)lo, hi - lo, access);
	CHECK("register-heap", heap != NULL, "%s", strerror(errno));
	/* More than the node's memory besides: the kernel takes heap pages back. */
	uint8_t *y = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *ymr = ibv_reg_mr(a.pd, y, size, access);
	CHECK("register-beyond-memory", ymr != NULL, "%s", strerror(errno));
	fill(y, size, 7);
	fill(y, size, 7);
	/* malloc and free all over the heap whose pages the node took: faults inside malloc, served. */
	for (int round = 0; round < 4; round++) {
		for (int i = round; i < BLOCKS; i += 4) {
			free(blocks[i]);
			blocks[i] = malloc(BLOCK);
			memset(blocks[i], (uint8_t)(i + 1), BLOCK);
		}
		fill(y, size, 7); /* and push the heap out again */
	}
	size_t wrong = 0;
	for (int i = 0; i < BLOCKS; i++)
		for (int j = 0; j < BLOCK; j += 512)
			if (blocks[i][j] != (uint8_t)(i + 1))
				wrong++;
	CHECK("malloc-on-pages-taken-back", wrong == 0, "%zu bytes of the heap wrong", wrong);
	/* A fault that is not the library's still reaches the program's handler. */
	own_faults = 0;
	volatile int *guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sigsetjmp(own_jump, 1) == 0)
		*guard = 1;
	CHECK("own-handler-gets-its-faults", own_faults == 1, "the program's handler saw %d faults", (int)own_faults);
	wrong = wrong_pages(y, size, 7);
	CHECK("library-faults-not-the-programs", wrong == 0 && own_faults == 1, "%zu pages wrong, the program's handler saw %d faults", wrong,
	      (int)own_faults);
	/* fork: the child gets copies; what it writes stays in it. */
	pid_t child = fork();
	if (child == 0) {
		void *p = malloc(100000);
		memset(p, 1, 100000);
		memset(y, 0xee, 4096 * 16);
		for (int i = 0; i < BLOCKS; i += 7)
			blocks[i][0] = 0xee;
		_exit(y[0] == 0xee && wrong_pages(y + 4096 * 16, size - 4096 * 16, 7 + 16) == 0 ? 0 : 3);
	}
	int status = -1;
	waitpid(child, &status, 0);
	CHECK("fork-child-runs", WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	CHECK("fork-child-writes-stay-in-child", wrong_pages(y, size, 7) == 0 && blocks[0][0] == 1, "the parent saw the child's writes");
	CHECK("system-runs", system("true") == 0, "system(\"true\") failed");
	FILE *pipe = popen("echo popen-ok", "r");
	char line[64] = "";
	if (pipe) {
		if (!fgets(line, sizeof(line), pipe))
			line[0] = 0;
		pclose(pipe);
	}
	CHECK("popen-runs", !strncmp(line, "popen-ok", 8), "popen read '%s'", line);
	sigaction(SIGSEGV, &old, NULL);
	if (ymr)
		ibv_dereg_mr(ymr);
	if (heap)
		ibv_dereg_mr(heap);
	wrong = 0;
	for (int i = 0; i < BLOCKS; i++) {
		if (blocks[i][BLOCK - 1] != (uint8_t)(i + 1))
			wrong++;
		free(blocks[i]);
	}
	CHECK("heap-whole-after-deregistration", wrong == 0, "%zu blocks wrong", wrong);
	ibv_destroy_qp(a.qp);
	ibv_dereg_mr(a.mr);
	ibv_close_device(a.ctx);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}

/*
 * The corners of libibverbs' API that once fell through to the real library: each answers as
 * Soft-RoCE's provider does (a value, or EOPNOTSUPP / EINVAL), never crashing.
 */
static int api(struct ibv_device **devs)
{
	struct side a;
	open_side(&a, devs[0], 1 << 16);
	struct ibv_gid_entry table[4];
	ssize_t n = ibv_query_gid_table(a.ctx, table, 4, 0);
	CHECK("query-gid-table", n == 1 && table[0].port_num == 1 && table[0].gid_index == 0, "returned %zd", n);
	struct ibv_gid_entry one;
	CHECK("query-gid-ex-bad-index", ibv_query_gid_ex(a.ctx, 1, 99, &one, 0) == EINVAL, "a GID index past the table was not EINVAL");
	CHECK("query-gid-ex", ibv_query_gid_ex(a.ctx, 1, 0, &one, 0) == 0 && !memcmp(&one.gid, &table[0].gid, sizeof(one.gid)), "differs");
	errno = 0;
	CHECK("reg-dmabuf-mr", ibv_reg_dmabuf_mr(a.pd, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
	union ibv_gid group;
	memset(&group, 0, sizeof(group));
	CHECK("attach-mcast-rc", ibv_attach_mcast(a.qp, &group, 0xc000) == EINVAL, "an RC queue pair joined a multicast group");
	errno = 0;
	CHECK("import-pd", ibv_import_pd(a.ctx, 1) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
	struct ibv_ece ece;
	CHECK("query-ece", ibv_query_ece(a.qp, &ece) == EOPNOTSUPP, "not EOPNOTSUPP");
	CHECK("rates", ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 && mbps_to_ibv_rate(25781) == IBV_RATE_25_GBPS
	      && ibv_rate_to_mult(IBV_RATE_40_GBPS) == 16 && mult_to_ibv_rate(4) == IBV_RATE_10_GBPS, "a rate conversion is wrong");
	CHECK("fork-status", ibv_is_fork_initialized() == IBV_FORK_UNNEEDED && ibv_fork_init() == 0, "fork is not safe");
	/* ibv_rereg_mr: a new PD, new access, a new range; the bytes stay and the keys work (a local send is enough to use them). */
	struct ibv_pd *pd2 = ibv_alloc_pd(a.ctx);
	uint8_t *buf = malloc(3 * 4096);
	memset(buf, 0x5c, 3 * 4096);
	struct ibv_mr *mr = ibv_reg_mr(a.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	int r = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, pd2, NULL, 0,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK("rereg-pd-access", r == 0 && mr->pd == pd2, "returned %d", r);
	r = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf + 4096, 2 * 4096, 0);
	CHECK("rereg-translation", r == 0 && mr->addr == buf + 4096 && mr->length == 2 * 4096, "returned %d", r);
	CHECK("rereg-bad-input", ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT, "accepted");
	CHECK("rereg-keeps-bytes", buf[0] == 0x5c && buf[3 * 4096 - 1] == 0x5c, "the buffer's bytes changed");
	CHECK("rereg-dereg", ibv_dereg_mr(mr) == 0, "%s", strerror(errno));
	free(buf);
	/* The same page from two contexts (the device opened twice): both register, the bytes survive either order of teardown. */
	struct ibv_context *second = ibv_open_device(devs[0]);
	struct ibv_pd *pd3 = second ? ibv_alloc_pd(second) : NULL;
	uint8_t *page = aligned_alloc(4096, 4096);
	memset(page, 0x31, 4096);
	struct ibv_mr *first_mr = ibv_reg_mr(a.pd, page, 64, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *second_mr = pd3 ? ibv_reg_mr(pd3, page + 128, 64, IBV_ACCESS_LOCAL_WRITE) : NULL;
	CHECK("same-page-two-contexts", first_mr && second_mr, "%s", strerror(errno));
	memset(page, 0x77, 4096);
	if (first_mr)
		ibv_dereg_mr(first_mr);
	if (second_mr)
		ibv_dereg_mr(second_mr);
	CHECK("same-page-two-contexts-keeps-bytes", page[0] == 0x77 && page[4095] == 0x77, "the page holds 0x%02x", page[0]);
	free(page);
	if (pd3)
		ibv_dealloc_pd(pd3);
	if (second)
		ibv_close_device(second);
	/* UC: created, reported as UC, taken through its own transitions (no RC timers), and refusing READs at post as Soft-RoCE does. */
	struct ibv_qp_init_attr uc_init = { .send_cq = a.cq, .recv_cq = a.cq, .qp_type = IBV_QPT_UC,
					    .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *uc = ibv_create_qp(a.pd, &uc_init);
	CHECK("uc-create", uc != NULL && uc->qp_type == IBV_QPT_UC, "%s", strerror(errno));
	if (uc) {
		struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
		int ok = !ibv_modify_qp(uc, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		struct ibv_port_attr port;
		ibv_query_port(a.ctx, 1, &port);
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_RTR;
		qa.path_mtu = IBV_MTU_1024;
		qa.dest_qp_num = uc->qp_num;
		qa.ah_attr.dlid = port.lid;
		qa.ah_attr.port_num = 1;
		CHECK("uc-rtr-takes-no-rc-attributes", ok && !ibv_modify_qp(uc, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN
									    | IBV_QP_RQ_PSN), "%s", strerror(errno));
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_RTS;
		qa.timeout = 14;
		CHECK("uc-rts-refuses-a-timeout", ibv_modify_qp(uc, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT) == EINVAL, "accepted");
		CHECK("uc-rts", !ibv_modify_qp(uc, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN), "%s", strerror(errno));
		struct ibv_sge sge = { .addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED };
		wr.wr.rdma.remote_addr = (uintptr_t)a.buf;
		wr.wr.rdma.rkey = a.mr->rkey;
		struct ibv_send_wr *bad = NULL;
		CHECK("uc-refuses-read", ibv_post_send(uc, &wr, &bad) == EINVAL && bad == &wr, "a READ was posted on a UC queue pair");
		struct ibv_qp_attr got;
		struct ibv_qp_init_attr got_init;
		CHECK("uc-query", !ibv_query_qp(uc, &got, IBV_QP_STATE, &got_init) && got_init.qp_type == IBV_QPT_UC && got.qp_state == IBV_QPS_RTS,
		      "type %d state %d", got_init.qp_type, got.qp_state);
		CHECK("uc-destroy", !ibv_destroy_qp(uc), "%s", strerror(errno));
	}
	/*
	 * UD: two pairs of one node, a global address handle; the datagram lands after the 40-byte GRH,
	 * which names this port's GID as its source, and the completion names the sender (src_qp, slid, IBV_WC_GRH).
	 */
	struct ibv_cq *ud_cq = ibv_create_cq(a.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ud_init = { .send_cq = ud_cq, .recv_cq = ud_cq, .qp_type = IBV_QPT_UD,
					    .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *ud1 = ibv_create_qp(a.pd, &ud_init);
	struct ibv_qp *ud2 = ibv_create_qp(a.pd, &ud_init);
	CHECK("ud-create", ud1 && ud2 && ud1->qp_type == IBV_QPT_UD, "%s", strerror(errno));
	if (ud1 && ud2) {
		struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
		CHECK("ud-init-needs-a-qkey", ibv_modify_qp(ud1, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == EINVAL, "accepted");
		int ok = 1;
		for (int i = 0; i < 2; i++) {
			struct ibv_qp *q = i ? ud2 : ud1;
			memset(&qa, 0, sizeof(qa));
			qa.qp_state = IBV_QPS_INIT;
			qa.port_num = 1;
			qa.qkey = 0x11111111;
			ok &= !ibv_modify_qp(q, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
			qa.qp_state = IBV_QPS_RTR;
			ok &= !ibv_modify_qp(q, &qa, IBV_QP_STATE);
			qa.qp_state = IBV_QPS_RTS;
			qa.sq_psn = 7;
			ok &= !ibv_modify_qp(q, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN);
		}
		CHECK("ud-to-rts", ok, "%s", strerror(errno));
		struct ibv_port_attr port;
		ibv_query_port(a.ctx, 1, &port);
		union ibv_gid gid;
		ibv_query_gid(a.ctx, 1, 0, &gid);
		struct ibv_ah_attr aa = { .dlid = port.lid, .port_num = 1, .is_global = 1 };
		aa.grh.dgid = gid;
		struct ibv_ah *ah = ibv_create_ah(a.pd, &aa);
		CHECK("ud-create-ah", ah != NULL, "%s", strerror(errno));
		struct ibv_ah_attr none = { .dlid = 0, .port_num = 1 };
		CHECK("ud-create-ah-refuses-lid-0", ibv_create_ah(a.pd, &none) == NULL && errno == EINVAL, "accepted");
		uint8_t *in = a.buf + 8192, *out = a.buf + 12288;
		memset(in, 0, 40 + 64);
		for (int i = 0; i < 64; i++)
			out[i] = (uint8_t)(i * 7 + 1);
		struct ibv_sge rsge = { .addr = (uintptr_t)in, .length = 40 + 64, .lkey = a.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 21, .sg_list = &rsge, .num_sge = 1 }, *rbad = NULL;
		struct ibv_sge ssge = { .addr = (uintptr_t)out, .length = 64, .lkey = a.mr->lkey };
		struct ibv_send_wr swr = { .wr_id = 22, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		swr.wr.ud.ah = ah;
		swr.wr.ud.remote_qpn = ud2->qp_num;
		swr.wr.ud.remote_qkey = 0x11111111;
		struct ibv_send_wr *sbad = NULL;
		struct ibv_send_wr write = swr;
		write.opcode = IBV_WR_RDMA_WRITE;
		CHECK("ud-refuses-write", ibv_post_send(ud1, &write, &sbad) == EINVAL, "a WRITE was posted on a UD queue pair");
		CHECK("ud-post", ah && !ibv_post_recv(ud2, &rwr, &rbad) && !ibv_post_send(ud1, &swr, &sbad), "%s", strerror(errno));
		struct ibv_wc wc, recv = { .status = IBV_WC_GENERAL_ERR };
		for (int i = 0; i < 2 && !wait_wc(ud_cq, &wc); i++)
			if (wc.wr_id == 21)
				recv = wc;
		CHECK("ud-receive", recv.status == IBV_WC_SUCCESS && recv.byte_len == 40 + 64 && recv.src_qp == ud1->qp_num && recv.slid == port.lid
			  && (recv.wc_flags & IBV_WC_GRH) && !memcmp(in + 40, out, 64),
		      "status %s, %u bytes from QPN %u LID %u, flags 0x%x", ibv_wc_status_str(recv.status), recv.byte_len, recv.src_qp, recv.slid,
		      recv.wc_flags);
		CHECK("ud-grh", (in[0] >> 4) == 6 && in[6] == 0x1b && !memcmp(in + 8, gid.raw, 16) && !memcmp(in + 24, gid.raw, 16),
		      "version %d, next header 0x%02x", in[0] >> 4, in[6]);
		/* Multicast: ud2 joins group 0xc001; a datagram to the group reaches it; after it leaves, none does. */
		union ibv_gid mgid = { .raw = { 0xff, 0x12, 0x40, 0x1b } };
		mgid.raw[15] = 1;
		struct ibv_ah_attr ma = { .dlid = 0xc001, .port_num = 1, .is_global = 1 };
		ma.grh.dgid = mgid;
		struct ibv_ah *group = ibv_create_ah(a.pd, &ma);
		CHECK("ud-multicast-attach", group && !ibv_attach_mcast(ud2, &mgid, 0xc001), "%s", strerror(errno));
		CHECK("ud-multicast-attach-refuses-rc", ibv_attach_mcast(a.qp, &mgid, 0xc001) == EINVAL, "an RC pair joined a group");
		if (group) {
			struct ibv_send_wr mwr = swr;
			mwr.wr_id = 23;
			mwr.wr.ud.ah = group;
			mwr.wr.ud.remote_qpn = 0xffffff;
			rwr.wr_id = 24;
			memset(in, 0, 40 + 64);
			int posted = !ibv_post_recv(ud2, &rwr, &rbad) && !ibv_post_send(ud1, &mwr, &sbad);
			struct ibv_wc mrecv = { .status = IBV_WC_GENERAL_ERR };
			for (int i = 0; i < 2 && posted && !wait_wc(ud_cq, &wc); i++)
				if (wc.wr_id == 24)
					mrecv = wc;
			CHECK("ud-multicast-receive", mrecv.status == IBV_WC_SUCCESS && mrecv.src_qp == ud1->qp_num && !memcmp(in + 40, out, 64),
			      "status %s from QPN %u", ibv_wc_status_str(mrecv.status), mrecv.src_qp);
			CHECK("ud-multicast-detach", !ibv_detach_mcast(ud2, &mgid, 0xc001) && ibv_detach_mcast(ud2, &mgid, 0xc001) != 0,
			      "%s", strerror(errno));
			rwr.wr_id = 25;
			mwr.wr_id = 26;
			posted = !ibv_post_recv(ud2, &rwr, &rbad) && !ibv_post_send(ud1, &mwr, &sbad);
			int after = 0;
			struct timespec pause = { 0, 2 * 1000 * 1000 };
			for (int i = 0; i < 100; i++) {
				if (ibv_poll_cq(ud_cq, 1, &wc) == 1 && wc.wr_id == 25)
					after++;
				nanosleep(&pause, NULL);
			}
			CHECK("ud-multicast-none-after-detach", posted && after == 0, "%d datagrams arrived after the detach", after);
			ibv_destroy_ah(group);
		}
		struct ibv_ah *back = ibv_create_ah_from_wc(a.pd, &recv, (struct ibv_grh *)in, 1);
		CHECK("ud-ah-from-wc", back != NULL, "%s", strerror(errno));
		if (back)
			ibv_destroy_ah(back);
		if (ah)
			ibv_destroy_ah(ah);
	}
	if (ud1)
		ibv_destroy_qp(ud1);
	if (ud2)
		ibv_destroy_qp(ud2);
	ibv_destroy_cq(ud_cq);
	ibv_dealloc_pd(pd2);
	ibv_destroy_qp(a.qp);
	ibv_dereg_mr(a.mr);
	ibv_destroy_cq(a.cq);
	ibv_dealloc_pd(a.pd);
	ibv_close_device(a.ctx);
	ibv_free_device_list(devs);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs || n < 2) {
		printf("FAIL devices: PAGEWIRE_NODE must name two nodes (found %d devices)\n", n);
		return 1;
	}
	if (argc > 2 && !strcmp(argv[1], "paging"))
		return paging(devs, (size_t)atol(argv[2]) << 20);
	if (argc > 1 && !strcmp(argv[1], "api"))
		return api(devs);
	if (argc > 2 && !strcmp(argv[1], "harsh"))
		return harsh(devs, (size_t)atol(argv[2]) << 20);
	struct side a, b;
	open_side(&a, devs[0], 1 << 16);
	open_side(&b, devs[1], 1 << 16);
	struct ibv_wc wc;

	/* A queue pair not yet ready to send refuses a post, as libibverbs' providers do. */
	struct ibv_sge sge = { .addr = (uintptr_t)a.buf, .length = 64, .lkey = a.mr->lkey };
	int e = post(&a, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	CHECK("post-before-rts-refused", e != 0, "ibv_post_send on a RESET queue pair returned 0");
	CHECK("rtr-without-init-refused", to_rts(&a, &b) != 0, "RESET -> RTR was accepted");

	CHECK("connect", !to_init(&a) && !to_init(&b) && !to_rts(&a, &b) && !to_rts(&b, &a), "the queue pairs could not be connected");

	/* The program's own stores are what the NIC sends, and the NIC's placement is what the peer loads. */
	memset(a.buf, 0xA5, 4096);
	sge.length = 4096;
	e = post(&a, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf + 8192, b.mr->rkey, 0);
	CHECK("write", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE
	      && b.buf[8192] == 0xA5 && b.buf[8192 + 4095] == 0xA5 && b.buf[8191] == 0x11 && b.buf[8192 + 4096] == 0x11,
	      "post %d status %s, peer bytes %02x %02x", e, ibv_wc_status_str(wc.status), b.buf[8192], b.buf[8192 + 4095]);

	/* Several scatter/gather entries: two pieces of the local buffer land one after the other remotely. */
	memset(a.buf + 100, 0x01, 10);
	memset(a.buf + 300, 0x02, 20);
	struct ibv_sge two[2] = { { (uintptr_t)a.buf + 100, 10, a.mr->lkey }, { (uintptr_t)a.buf + 300, 20, a.mr->lkey } };
	e = post(&a, IBV_WR_RDMA_WRITE, two, 2, (uintptr_t)b.buf + 20000, b.mr->rkey, 0);
	CHECK("write-gather", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && b.buf[20000] == 1 && b.buf[20009] == 1
	      && b.buf[20010] == 2 && b.buf[20029] == 2 && b.buf[20030] == 0x11, "post %d status %s", e, ibv_wc_status_str(wc.status));

	/* Inline data from memory that is not registered at all. */
	char text[] = "inline bytes from the stack";
	struct ibv_sge in = { (uintptr_t)text, sizeof(text), 0 };
	e = post(&a, IBV_WR_RDMA_WRITE, &in, 1, (uintptr_t)b.buf + 30000, b.mr->rkey, IBV_SEND_INLINE);
	CHECK("write-inline", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(b.buf + 30000, text, sizeof(text)),
	      "post %d status %s", e, ibv_wc_status_str(wc.status));

	/* READ brings the peer's bytes into the local buffer. */
	memset(b.buf + 40000, 0x5A, 512);
	sge = (struct ibv_sge){ (uintptr_t)a.buf + 50000, 512, a.mr->lkey };
	e = post(&a, IBV_WR_RDMA_READ, &sge, 1, (uintptr_t)b.buf + 40000, b.mr->rkey, 0);
	CHECK("read", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && a.buf[50000] == 0x5A
	      && a.buf[50511] == 0x5A, "post %d status %s", e, ibv_wc_status_str(wc.status));

	/* Atomics: the word before lands in the local buffer. */
	uint64_t *word = (uint64_t *)(b.buf + 60000);
	*word = 100;
	sge = (struct ibv_sge){ (uintptr_t)a.buf + 60000, 8, a.mr->lkey };
	struct ibv_send_wr fa = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED, .wr.atomic = { .remote_addr = (uintptr_t)word, .compare_add = 5,
										   .rkey = b.mr->rkey } }, *bad;
	e = ibv_post_send(a.qp, &fa, &bad);
	CHECK("fetch-add", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD
	      && *(uint64_t *)(a.buf + 60000) == 100 && *word == 105, "post %d status %s before %" PRIu64 " after %" PRIu64, e,
	      ibv_wc_status_str(wc.status), *(uint64_t *)(a.buf + 60000), *word);
	fa.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	fa.wr.atomic.compare_add = 105;
	fa.wr.atomic.swap = 7;
	e = ibv_post_send(a.qp, &fa, &bad);
	CHECK("compare-swap", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP
	      && *(uint64_t *)(a.buf + 60000) == 105 && *word == 7, "post %d status %s", e, ibv_wc_status_str(wc.status));

	/* The same on ON_DEMAND memory (which perftest will not try): an explicit ODP region on the peer. */
	uint8_t *odp = mmap(NULL, 16384, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	*(uint64_t *)(odp + 4096) = 40;
	struct ibv_mr *odp_mr = ibv_reg_mr(b.pd, odp, 16384, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC
					   | IBV_ACCESS_ON_DEMAND);
	fa.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	fa.wr.atomic.remote_addr = (uintptr_t)odp + 4096;
	fa.wr.atomic.compare_add = 2;
	fa.wr.atomic.rkey = odp_mr ? odp_mr->rkey : 0;
	e = odp_mr ? ibv_post_send(a.qp, &fa, &bad) : -1;
	CHECK("fetch-add-on-demand", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && *(uint64_t *)(a.buf + 60000) == 40
	      && *(uint64_t *)(odp + 4096) == 42, "register %p post %d status %s", (void *)odp_mr, e, ibv_wc_status_str(wc.status));
	if (odp_mr)
		ibv_dereg_mr(odp_mr);
	CHECK("on-demand-bytes-kept", *(uint64_t *)(odp + 4096) == 42, "after deregistration the word is %" PRIu64, *(uint64_t *)(odp + 4096));

	/* SEND with immediate into a posted receive. */
	struct ibv_sge rs = { (uintptr_t)b.buf + 1000, 256, b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 99, .sg_list = &rs, .num_sge = 1 }, *rbad;
	CHECK("post-recv", !ibv_post_recv(b.qp, &rwr, &rbad), "ibv_post_recv failed");
	memcpy(a.buf + 2000, "hello, pagewire", 16);
	sge = (struct ibv_sge){ (uintptr_t)a.buf + 2000, 16, a.mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 8, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0xC0FFEE) };
	e = ibv_post_send(a.qp, &sw, &bad);
	struct ibv_wc rwc;
	CHECK("send-with-imm", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && !wait_wc(b.cq, &rwc)
	      && rwc.status == IBV_WC_SUCCESS && rwc.opcode == IBV_WC_RECV && rwc.wr_id == 99 && rwc.byte_len == 16
	      && (rwc.wc_flags & IBV_WC_WITH_IMM) && rwc.imm_data == htobe32(0xC0FFEE) && !memcmp(b.buf + 1000, "hello, pagewire", 16),
	      "post %d, send %s, receive %s", e, ibv_wc_status_str(wc.status), ibv_wc_status_str(rwc.status));

	/* An unsignaled request completes silently; the next signaled one implies it. */
	sge = (struct ibv_sge){ (uintptr_t)a.buf, 64, a.mr->lkey };
	struct ibv_send_wr quiet = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				     .wr.rdma = { (uintptr_t)b.buf, b.mr->rkey } };
	struct ibv_send_wr loud = quiet;
	loud.wr_id = 2;
	loud.send_flags = IBV_SEND_SIGNALED;
	quiet.next = &loud;
	e = ibv_post_send(a.qp, &quiet, &bad);
	CHECK("unsignaled", !e && !wait_wc(a.cq, &wc) && wc.wr_id == 2, "the first completion was wr_id %" PRIu64, wc.wr_id);

	/* A bad rkey: a remote access error completion, and the queue pair goes to the error state. */
	sge = (struct ibv_sge){ (uintptr_t)a.buf, 64, a.mr->lkey };
	e = post(&a, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey ^ 0x40, 0);
	CHECK("bad-rkey", !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR, "post %d status %s", e,
	      ibv_wc_status_str(wc.status));
	/* In the error state a post is taken and completes flushed, as the standard (C10-42) and Soft-RoCE have it. */
	e = post(&a, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	CHECK("error-state", a.qp->state == IBV_QPS_ERR && !e && !wait_wc(a.cq, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "state %d, post %d, completion %s", a.qp->state, e, ibv_wc_status_str(wc.status));

	/* A registered buffer the program unmaps: deregistering it later neither fails nor crashes. */
	struct side c = { 0 };
	uint8_t *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *gmr = ibv_reg_mr(a.pd, gone, 8192, IBV_ACCESS_LOCAL_WRITE);
	munmap(gone, 8192);
	CHECK("freed-while-registered", gmr && ibv_dereg_mr(gmr) == 0, "register %p, deregister failed", (void *)gmr);
	(void)c;

	/* Deregistration gives the program its bytes back in its own memory. */
	uint8_t *own = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(own, 0x77, 8192);
	struct ibv_mr *omr = ibv_reg_mr(a.pd, own, 8192, IBV_ACCESS_LOCAL_WRITE);
	own[5] = 0x78;
	int dereg = omr ? ibv_dereg_mr(omr) : -1;
	own[6] = 0x79;
	CHECK("dereg-keeps-bytes", omr && !dereg && own[0] == 0x77 && own[5] == 0x78 && own[6] == 0x79 && own[8191] == 0x77,
	      "bytes after deregistration: %02x %02x %02x", own[0], own[5], own[6]);

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	ibv_free_device_list(devs);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
