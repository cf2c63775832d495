/*
 * pagewire-verbs-conformance: RC's semantics as the specification and Soft-RoCE have them, one case per
 * behaviour, against two Pagewire nodes from one process (PAGEWIRE_NODE=A,B gives pagewire0 and
 * pagewire1). Prints "ok NAME" or "FAIL NAME: why" for each check, then PASSED or FAILED; exits 1 on a
 * failure. `pagewire-verbs-conformance NAME...` runs only the cases named. The rdma_cm cases bind to the first
 * node's address, which getifaddrs lists as interface pagewire0.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int failures;
#define CHECK(name, cond, ...)                                                                                                   \
	do {                                                                                                                     \
		if (cond) {                                                                                                      \
			printf("ok %s\n", name);                                                                                 \
		} else {                                                                                                         \
			printf("FAIL %s: ", name);                                                                               \
			printf(__VA_ARGS__);                                                                                     \
			printf("\n");                                                                                            \
			failures++;                                                                                              \
		}                                                                                                                \
		fflush(stdout);                                                                                                  \
	} while (0)

#define SIZE (1 << 20)
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_device **devices;

/* One end: a device, a PD, a CQ (on a completion channel), a registered buffer and an RC queue pair. */
struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
	struct ibv_mr *mr;
	uint16_t lid;
};

static void open_side(struct side *s, int device, int cqe, struct ibv_srq *(*make_srq)(struct side *))
{
	memset(s, 0, sizeof(*s));
	s->ctx = ibv_open_device(devices[device]);
	if (!s->ctx) {
		printf("FAIL open: %s\n", strerror(errno));
		exit(1);
	}
	s->pd = ibv_alloc_pd(s->ctx);
	s->channel = ibv_create_comp_channel(s->ctx);
	s->cq = ibv_create_cq(s->ctx, cqe, NULL, s->channel, 0);
	s->buf = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	s->mr = ibv_reg_mr(s->pd, s->buf, SIZE, ACCESS);
	if (!s->pd || !s->cq || !s->mr) {
		printf("FAIL set-up: %s\n", strerror(errno));
		exit(1);
	}
	struct ibv_qp_init_attr init = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
					.srq = make_srq ? make_srq(s) : NULL,
					.cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4}};
	s->qp = ibv_create_qp(s->pd, &init);
	if (!s->qp) {
		printf("FAIL create-qp: %s\n", strerror(errno));
		exit(1);
	}
	struct ibv_port_attr port;
	ibv_query_port(s->ctx, 1, &port);
	s->lid = port.lid;
}

static void close_side(struct side *s)
{
	struct ibv_srq *srq = s->qp ? s->qp->srq : NULL;
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (srq)
		ibv_destroy_srq(srq);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_destroy_comp_channel(s->channel);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	munmap(s->buf, SIZE);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = ACCESS & ~IBV_ACCESS_LOCAL_WRITE};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct side *s, struct side *peer, uint32_t rq_psn, uint8_t min_rnr_timer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp->qp_num, .rq_psn = rq_psn,
				.max_dest_rd_atomic = 4, .min_rnr_timer = min_rnr_timer, .ah_attr = {.dlid = peer->lid, .port_num = 1}};
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
						| IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct side *s, uint32_t sq_psn, uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .timeout = timeout, .retry_cnt = retry_cnt, .rnr_retry = rnr_retry,
				.sq_psn = sq_psn, .max_rd_atomic = 4};
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN
						| IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Connects a and b both ways, a's requests numbered from psn_ab and b's from psn_ba. */
static int connect_pair(struct side *a, struct side *b, uint32_t psn_ab, uint32_t psn_ba)
{
	return to_init(a->qp) || to_init(b->qp) || to_rtr(a, b, psn_ba, 1) || to_rtr(b, a, psn_ab, 1)
	       || to_rts(a, psn_ab, 14, 7, 7) || to_rts(b, psn_ba, 14, 7, 7);
}

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Polls up to n completions within ms milliseconds; returns how many came. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	int got = 0;
	uint64_t until = now_ms() + (uint64_t)ms;
	while (got < n && now_ms() < until) {
		int k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			return -1;
		got += k;
	}
	return got;
}

/* The next asynchronous event within ms milliseconds (acknowledged), or -1. */
static int next_async_event(struct ibv_context *ctx, int ms, struct ibv_async_event *out)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		return -1;
	if (ibv_get_async_event(ctx, out))
		return -1;
	ibv_ack_async_event(out);
	return 0;
}

static int post_send(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, struct ibv_sge *sge, int n, uint64_t remote, uint32_t rkey,
		     int flags)
{
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = sge, .num_sge = n, .opcode = op, .send_flags = IBV_SEND_SIGNALED | flags,
				 .wr.rdma = {.remote_addr = remote, .rkey = rkey}},
			   *bad;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = sge, .num_sge = n}, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

/* ---- cases ------------------------------------------------------------------------------------- */

static void modify_table(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_RTR};
	CHECK("modify-reset-to-rtr-refused", ibv_modify_qp(a.qp, &attr, IBV_QP_STATE) == EINVAL, "RESET to RTR was not EINVAL");
	attr.qp_state = IBV_QPS_INIT;
	CHECK("modify-init-needs-port", ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) == EINVAL,
	      "INIT without IBV_QP_PORT was not EINVAL");
	CHECK("modify-to-init", to_init(a.qp) == 0 && to_init(b.qp) == 0, "RESET to INIT with its attributes failed");
	attr = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .dest_qp_num = b.qp->qp_num, .ah_attr = {.dlid = b.lid, .port_num = 1}};
	CHECK("modify-rtr-needs-its-attributes", ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN) == EINVAL,
	      "RTR without PATH_MTU, RQ_PSN, MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER was not EINVAL");
	CHECK("modify-to-rtr", to_rtr(&a, &b, 77, 1) == 0, "INIT to RTR failed");
	struct ibv_sge sge = {(uintptr_t)a.buf, 8, a.mr->lkey};
	CHECK("post-send-in-rtr-refused", post_send(a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0) == EINVAL,
	      "a send posted in RTR was not EINVAL");
	attr = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .sq_psn = 5,
				    .max_rd_atomic = 1, .qkey = 1};
	CHECK("modify-rts-refuses-foreign-attributes", ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT
										   | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC
										   | IBV_QP_QKEY) == EINVAL,
	      "an RC pair took a Q_Key");
	CHECK("modify-to-rts", to_rts(&a, 5, 14, 7, 7) == 0, "RTR to RTS failed");
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	CHECK("query-qp-reports-attributes", ibv_query_qp(a.qp, &q, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_TIMEOUT, &qi) == 0
						   && q.qp_state == IBV_QPS_RTS && q.sq_psn == 5 && q.rq_psn == 77 && q.timeout == 14
						   && q.dest_qp_num == b.qp->qp_num && qi.cap.max_send_sge == 4,
	      "state %d sq_psn %u rq_psn %u timeout %u dest %u", q.qp_state, q.sq_psn, q.rq_psn, q.timeout, q.dest_qp_num);
	attr = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .cur_qp_state = IBV_QPS_RTR};
	CHECK("modify-checks-cur-state", ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_CUR_STATE) == EINVAL,
	      "a cur_qp_state that is not the pair's was taken");
	struct ibv_qp_rate_limit_attr rate = {.rate_limit = 1000000};
	CHECK("modify-qp-rate-limit", ibv_modify_qp_rate_limit(a.qp, &rate) == 0, "ibv_modify_qp_rate_limit failed");
	close_side(&a);
	close_side(&b);
}

static void error_flushes_in_order(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	/* b stays in INIT: a's requests reach a pair that drops them, so they stay outstanding */
	int e = to_init(a.qp) || to_init(b.qp) || to_rtr(&a, &b, 0, 1) || to_rts(&a, 0, 14, 7, 7);
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	for (int i = 0; i < 5 && !e; i++)
		e = post_send(a.qp, 100 + i, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	for (int i = 0; i < 3 && !e; i++)
		e = post_recv(a.qp, 200 + i, &sge, 1);
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	e = e || ibv_modify_qp(a.qp, &err, IBV_QP_STATE);
	struct ibv_wc wc[8];
	int n = e ? 0 : poll_n(a.cq, wc, 8, 5000);
	int in_order = n == 8;
	for (int i = 0; i < n; i++)
		in_order = in_order && wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].wr_id == (uint64_t)(i < 5 ? 100 + i : 200 + i - 5);
	CHECK("error-flushes-sends-then-receives-in-order", in_order, "set-up %d, %d completions, the first %s wr %" PRIu64, e, n,
	      n ? ibv_wc_status_str(wc[0].status) : "-", n ? wc[0].wr_id : 0);
	e = post_send(a.qp, 300, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0) || post_recv(a.qp, 301, &sge, 1);
	n = e ? 0 : poll_n(a.cq, wc, 2, 5000);
	CHECK("posts-in-error-complete-flushed", n == 2 && wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[1].status == IBV_WC_WR_FLUSH_ERR,
	      "post %d, %d completions", e, n);
	struct ibv_async_event ae;
	CHECK("owner-error-raises-no-fatal", next_async_event(a.ctx, 200, &ae) != 0, "event %s", ibv_event_type_str(ae.event_type));

	/* RESET, then connected again with new sequence numbers on both sides */
	struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
	e = ibv_modify_qp(a.qp, &reset, IBV_QP_STATE) || ibv_modify_qp(b.qp, &reset, IBV_QP_STATE);
	e = e || connect_pair(&a, &b, 0xfffff0, 0x1234);
	memset(a.buf, 0x5a, 4096);
	sge.length = 4096;
	e = e || post_send(a.qp, 400, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf + 8192, b.mr->rkey, 0);
	n = e ? 0 : poll_n(a.cq, wc, 1, 10000);
	CHECK("reset-pair-connects-again", n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 400 && b.buf[8192 + 4095] == 0x5a,
	      "set-up %d, %d completions, status %s", e, n, n ? ibv_wc_status_str(wc[0].status) : "-");
	close_side(&a);
	close_side(&b);
}

static void retries_end_requests(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	/* b never leaves INIT: timeout 1 (raised to the node's floor) and retry_cnt 1 end the write soon */
	int e = to_init(a.qp) || to_init(b.qp) || to_rtr(&a, &b, 0, 1) || to_rts(&a, 0, 1, 1, 7);
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	uint64_t start = now_ms();
	e = e || post_send(a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	struct ibv_wc wc;
	int n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	uint64_t took = now_ms() - start;
	CHECK("retry-cnt-ends-in-retry-exc-err", n == 1 && wc.status == IBV_WC_RETRY_EXC_ERR && took < 5000, "set-up %d, %d completions, %s after %"
	      PRIu64 " ms", e, n, n ? ibv_wc_status_str(wc.status) : "-", took);
	struct ibv_async_event ae;
	CHECK("fatal-completion-raises-qp-fatal", next_async_event(a.ctx, 2000, &ae) == 0 && ae.event_type == IBV_EVENT_QP_FATAL
						     && ae.element.qp == a.qp,
	      "no IBV_EVENT_QP_FATAL for the pair");
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	CHECK("failed-pair-is-in-error", ibv_query_qp(a.qp, &q, IBV_QP_STATE, &qi) == 0 && q.qp_state == IBV_QPS_ERR, "state %d",
	      q.qp_state);
	close_side(&a);
	close_side(&b);

	/* rnr_retry 1: a SEND nobody posted a receive for ends in RNR_RETRY_EXC_ERR; 7 waits until one is posted */
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	e = to_init(a.qp) || to_init(b.qp) || to_rtr(&a, &b, 0, 1) || to_rtr(&b, &a, 0, 1) || to_rts(&a, 0, 14, 7, 1)
	    || to_rts(&b, 0, 14, 7, 7);
	e = e || post_send(a.qp, 2, IBV_WR_SEND, &sge, 1, 0, 0, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("rnr-retry-ends-in-rnr-retry-exc-err", n == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR, "set-up %d, %d completions, %s", e,
	      n, n ? ibv_wc_status_str(wc.status) : "-");
	close_side(&a);
	close_side(&b);

	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	e = connect_pair(&a, &b, 0, 0);
	e = e || post_send(a.qp, 3, IBV_WR_SEND, &sge, 1, 0, 0, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 300);
	struct ibv_sge rsge = {(uintptr_t)b.buf, 64, b.mr->lkey};
	e = e || post_recv(b.qp, 4, &rsge, 1);
	int m = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("rnr-retry-7-retries-until-a-receive-comes", n == 0 && m == 1 && wc.status == IBV_WC_SUCCESS, "set-up %d, early %d, late %d %s",
	      e, n, m, m ? ibv_wc_status_str(wc.status) : "-");
	close_side(&a);
	close_side(&b);
}

static void zero_length_and_no_elements(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 7, 9);
	struct ibv_wc wc;
	e = e || post_send(a.qp, 1, IBV_WR_RDMA_WRITE, NULL, 0, 0, 0, 0);
	int n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("zero-length-write-needs-no-rkey", n == 1 && wc.status == IBV_WC_SUCCESS, "set-up %d, %d, %s", e, n,
	      n ? ibv_wc_status_str(wc.status) : "-");
	struct ibv_sge empty = {(uintptr_t)a.buf, 0, 0};
	e = post_send(a.qp, 2, IBV_WR_RDMA_READ, &empty, 1, 0x1000, 0xdead, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("zero-length-read-needs-no-rkey", n == 1 && wc.status == IBV_WC_SUCCESS, "post %d, %d, %s", e, n,
	      n ? ibv_wc_status_str(wc.status) : "-");
	e = post_recv(b.qp, 3, NULL, 0) || post_send(a.qp, 4, IBV_WR_SEND_WITH_IMM, NULL, 0, 0, 0, 0);
	struct ibv_wc r;
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	int m = e ? 0 : poll_n(b.cq, &r, 1, 10000);
	CHECK("send-without-elements-into-receive-without", n == 1 && m == 1 && wc.status == IBV_WC_SUCCESS && r.status == IBV_WC_SUCCESS
							    && r.byte_len == 0 && r.wr_id == 3,
	      "post %d, %d/%d, %s", e, n, m, m ? ibv_wc_status_str(r.status) : "-");
	close_side(&a);
	close_side(&b);
}

static void scatter_gather(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 1, 2);
	for (int i = 0; i < 16384; i++)
		a.buf[i] = (uint8_t)(i * 7);
	/* three pieces, not adjacent, one of them in a second registration */
	uint8_t *other = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(other, 0xee, 1 << 16);
	struct ibv_mr *omr = ibv_reg_mr(a.pd, other, 1 << 16, ACCESS);
	struct ibv_sge gather[3] = {{(uintptr_t)a.buf + 100, 3000, a.mr->lkey}, {(uintptr_t)other + 5000, 1500, omr->lkey},
				    {(uintptr_t)a.buf + 9000, 700, a.mr->lkey}};
	struct ibv_sge scatter[2] = {{(uintptr_t)b.buf + 64, 1000, b.mr->lkey}, {(uintptr_t)b.buf + 20000, 8000, b.mr->lkey}};
	e = e || post_recv(b.qp, 1, scatter, 2) || post_send(a.qp, 2, IBV_WR_SEND, gather, 3, 0, 0, 0);
	struct ibv_wc wc, r;
	int n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	int m = e ? 0 : poll_n(b.cq, &r, 1, 10000);
	uint8_t expect[5200];
	memcpy(expect, a.buf + 100, 3000);
	memcpy(expect + 3000, other + 5000, 1500);
	memcpy(expect + 4500, a.buf + 9000, 700);
	int same = m == 1 && !memcmp(b.buf + 64, expect, 1000) && !memcmp(b.buf + 20000, expect + 1000, 4200);
	CHECK("send-gathers-and-receive-scatters", n == 1 && m == 1 && wc.status == IBV_WC_SUCCESS && r.status == IBV_WC_SUCCESS
						       && r.byte_len == 5200 && same,
	      "post %d, %d/%d, %s %u bytes, same %d", e, n, m, m ? ibv_wc_status_str(r.status) : "-", m ? r.byte_len : 0, same);
	e = post_send(a.qp, 3, IBV_WR_RDMA_WRITE, gather, 3, (uintptr_t)b.buf + 40000, b.mr->rkey, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("write-gathers", n == 1 && wc.status == IBV_WC_SUCCESS && !memcmp(b.buf + 40000, expect, 5200), "post %d, %d", e, n);
	struct ibv_sge land[3] = {{(uintptr_t)other + 100, 200, omr->lkey}, {(uintptr_t)a.buf + 60000, 0, a.mr->lkey},
				  {(uintptr_t)a.buf + 70000, 5000, a.mr->lkey}};
	e = post_send(a.qp, 4, IBV_WR_RDMA_READ, land, 3, (uintptr_t)b.buf + 40000, b.mr->rkey, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("read-scatters", n == 1 && wc.status == IBV_WC_SUCCESS && !memcmp(other + 100, expect, 200)
				   && !memcmp(a.buf + 70000, expect + 200, 5000),
	      "post %d, %d", e, n);
	struct ibv_sge too_many[5] = {gather[0], gather[1], gather[2], gather[0], gather[1]};
	struct ibv_send_wr wr = {.wr_id = 5, .sg_list = too_many, .num_sge = 5, .opcode = IBV_WR_SEND}, *bad = NULL;
	CHECK("more-elements-than-max-send-sge-refused", ibv_post_send(a.qp, &wr, &bad) == EINVAL && bad == &wr, "not EINVAL");
	ibv_dereg_mr(omr);
	munmap(other, 1 << 16);
	close_side(&a);
	close_side(&b);
}

static void fence_and_atomics(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 3, 4);
	memset(b.buf, 0x77, 4096);
	memset(a.buf, 0, 8192);
	/* READ b's page into a's buffer, then WRITE that buffer to b's next page: fenced, the WRITE carries what the READ brought */
	struct ibv_sge local = {(uintptr_t)a.buf, 4096, a.mr->lkey};
	e = e || post_send(a.qp, 1, IBV_WR_RDMA_READ, &local, 1, (uintptr_t)b.buf, b.mr->rkey, 0)
	    || post_send(a.qp, 2, IBV_WR_RDMA_WRITE, &local, 1, (uintptr_t)b.buf + 4096, b.mr->rkey, IBV_SEND_FENCE);
	struct ibv_wc wc[2];
	int n = e ? 0 : poll_n(a.cq, wc, 2, 10000);
	CHECK("fence-orders-a-write-after-the-read-before-it", n == 2 && wc[1].status == IBV_WC_SUCCESS && b.buf[4096] == 0x77
								   && b.buf[8191] == 0x77,
	      "post %d, %d completions, b's second page starts %02x", e, n, b.buf[4096]);

	/* the fetched word is in the requester's buffer once the completion exists, before anyone polls */
	uint64_t *word = (uint64_t *)(b.buf + 8192);
	*word = 41;
	volatile uint64_t *fetched = (volatile uint64_t *)(a.buf + 256);
	*fetched = 0;
	struct ibv_sge eight = {(uintptr_t)fetched, 8, a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 3, .sg_list = &eight, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED, .wr.atomic = {.remote_addr = (uintptr_t)word, .rkey = b.mr->rkey, .compare_add = 1}},
			   *bad;
	e = ibv_post_send(a.qp, &wr, &bad);
	uint64_t until = now_ms() + 10000;
	while (!e && *fetched != 41 && now_ms() < until)
		usleep(1000);
	CHECK("atomic-result-lands-before-the-poll", *fetched == 41, "the buffer holds %" PRIu64 " before polling", *fetched);
	n = e ? 0 : poll_n(a.cq, wc, 1, 10000);
	CHECK("atomic-completes", n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_FETCH_ADD && *word == 42,
	      "%d completions, word %" PRIu64, n, *word);
	/* an unsignalled atomic completes silently, its word in its buffer */
	wr.wr_id = 4;
	wr.send_flags = 0;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 100;
	struct ibv_sge tail = {(uintptr_t)a.buf, 8, a.mr->lkey};
	e = ibv_post_send(a.qp, &wr, &bad) || post_send(a.qp, 5, IBV_WR_RDMA_WRITE, &tail, 1, (uintptr_t)b.buf + 12288, b.mr->rkey, 0);
	n = e ? 0 : poll_n(a.cq, wc, 2, 3000);
	CHECK("unsignalled-atomic-completes-silently", n == 1 && wc[0].wr_id == 5 && *fetched == 42 && *word == 100,
	      "post %d, %d completions (first wr %" PRIu64 "), fetched %" PRIu64 ", word %" PRIu64, e, n, n ? wc[0].wr_id : 0, *fetched, *word);
	close_side(&a);
	close_side(&b);
}

/* Whether a completion event arrives on the channel within ms milliseconds (acknowledged, and the CQ re-armed by the caller). */
static int channel_event(struct side *s, int ms)
{
	struct pollfd p = {.fd = s->channel->fd, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		return 0;
	struct ibv_cq *cq;
	void *context;
	if (ibv_get_cq_event(s->channel, &cq, &context))
		return 0;
	ibv_ack_cq_events(cq, 1);
	return 1;
}

static void solicited_events(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 0, 0);
	struct ibv_sge rsge = {(uintptr_t)b.buf, 64, b.mr->lkey};
	struct ibv_sge ssge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	e = e || post_recv(b.qp, 1, &rsge, 1) || post_recv(b.qp, 2, &rsge, 1) || ibv_req_notify_cq(b.cq, 1);
	e = e || post_send(a.qp, 10, IBV_WR_SEND, &ssge, 1, 0, 0, 0);
	struct ibv_wc wc[2];
	poll_n(a.cq, wc, 1, 10000);
	int woke_early = channel_event(&b, 300);
	e = e || post_send(a.qp, 11, IBV_WR_SEND, &ssge, 1, 0, 0, IBV_SEND_SOLICITED);
	int woke = channel_event(&b, 10000);
	CHECK("solicited-only-cq-wakes-for-solicited-receive", !e && !woke_early && woke, "set-up %d, woke for the plain send %d, for the "
	      "solicited one %d", e, woke_early, woke);
	int n = poll_n(b.cq, wc, 2, 5000);
	CHECK("both-receives-complete", n == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2, "%d receives", n);
	close_side(&a);
	close_side(&b);
}

static void cq_overflow(void)
{
	struct side a, b;
	open_side(&a, 0, 2, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 0, 0);
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	for (int i = 0; i < 4 && !e; i++)
		e = post_send(a.qp, 1 + i, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	/* the third and the fourth find it full: one IBV_EVENT_CQ_ERR each, and the CQ keeps the first two */
	struct ibv_async_event ae;
	int event = !e;
	for (int i = 0; i < 2 && event; i++)
		event = next_async_event(a.ctx, 10000, &ae) == 0 && ae.event_type == IBV_EVENT_CQ_ERR && ae.element.cq == a.cq;
	CHECK("resize-cq-below-its-count-refused", ibv_resize_cq(a.cq, 1) == EINVAL, "a CQ holding 2 completions shrank to 1");
	struct ibv_wc wc[4];
	int n = poll_n(a.cq, wc, 4, 500);
	CHECK("cq-overflow-raises-cq-err-and-keeps-its-size", event && n == 2, "post %d, CQ_ERR %d, %d completions kept", e, event, n);
	CHECK("resize-cq", ibv_resize_cq(a.cq, 8) == 0 && a.cq->cqe == 8, "resizing an empty CQ to 8 failed");
	close_side(&a);
	close_side(&b);
}

static void queue_pair_events(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	/* b in RTR only: a's first write reaches it, and b hears COMM_EST */
	int e = to_init(a.qp) || to_init(b.qp) || to_rtr(&b, &a, 0, 1) || to_rtr(&a, &b, 0, 1) || to_rts(&a, 0, 14, 7, 7);
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	e = e || post_send(a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	struct ibv_wc wc;
	int n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	struct ibv_async_event ae;
	CHECK("first-request-in-rtr-raises-comm-est", n == 1 && next_async_event(b.ctx, 5000, &ae) == 0
						       && ae.event_type == IBV_EVENT_COMM_EST && ae.element.qp == b.qp,
	      "set-up %d, %d completions", e, n);
	/* SQD with en_sqd_async_notify: SQ_DRAINED once the write under way is done */
	e = e || post_send(a.qp, 2, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	struct ibv_qp_attr sqd = {.qp_state = IBV_QPS_SQD, .en_sqd_async_notify = 1};
	e = e || ibv_modify_qp(a.qp, &sqd, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
	CHECK("sqd-raises-sq-drained", !e && next_async_event(a.ctx, 5000, &ae) == 0 && ae.event_type == IBV_EVENT_SQ_DRAINED,
	      "set-up %d", e);
	struct ibv_qp_attr back = {.qp_state = IBV_QPS_RTS};
	CHECK("sqd-back-to-rts", ibv_modify_qp(a.qp, &back, IBV_QP_STATE) == 0, "SQD to RTS failed");
	poll_n(a.cq, &wc, 1, 5000);
	close_side(&a);
	close_side(&b);
}

static struct ibv_srq *make_srq(struct side *s)
{
	struct ibv_srq_init_attr attr = {.attr = {.max_wr = 16, .max_sge = 2}};
	return ibv_create_srq(s->pd, &attr);
}

static void last_wqe_reached(void)
{
	struct side a;
	open_side(&a, 0, 64, make_srq);
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	int e = to_init(a.qp) || ibv_modify_qp(a.qp, &err, IBV_QP_STATE);
	struct ibv_async_event ae;
	CHECK("srq-pair-in-error-raises-last-wqe-reached", !e && next_async_event(a.ctx, 5000, &ae) == 0
							   && ae.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ae.element.qp == a.qp,
	      "set-up %d", e);
	close_side(&a);
}

/* A CQ from ibv_create_cq_ex: the poll-ex calls and the fields asked for, with the node's timestamps. */
static void extended_cq(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	struct ibv_cq_init_attr_ex bad = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_CVLAN};
	errno = 0;
	CHECK("cq-ex-refuses-fields-it-cannot-report", ibv_create_cq_ex(a.ctx, &bad) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
	struct ibv_cq_init_attr_ex attr = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM
								       | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
								       | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(b.ctx, &attr);
	CHECK("create-cq-ex", cq != NULL, "%s", strerror(errno));
	if (!cq) {
		close_side(&a);
		close_side(&b);
		return;
	}
	/* b's receives complete into the extended CQ */
	ibv_destroy_qp(b.qp);
	struct ibv_qp_init_attr init = {.send_cq = b.cq, .recv_cq = ibv_cq_ex_to_cq(cq), .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	b.qp = ibv_create_qp(b.pd, &init);
	int e = !b.qp || connect_pair(&a, &b, 0, 0);
	struct ibv_sge r = {(uintptr_t)b.buf, 4096, b.mr->lkey};
	struct ibv_sge s1 = {(uintptr_t)a.buf, 100, a.mr->lkey};
	e = e || post_recv(b.qp, 1, &r, 1) || post_recv(b.qp, 2, &r, 1);
	struct timespec before;
	clock_gettime(CLOCK_MONOTONIC, &before);
	struct ibv_send_wr wr = {.wr_id = 9, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htobe32(0xabcd)}, *badwr;
	e = e || ibv_post_send(a.qp, &wr, &badwr) || post_send(a.qp, 10, IBV_WR_SEND, &s1, 1, 0, 0, 0);
	struct ibv_wc wc[2];
	poll_n(a.cq, wc, 2, 10000);
	int got = 0, ok = 1;
	uint64_t until = now_ms() + 10000;
	struct ibv_poll_cq_attr pa = {0};
	while (!e && got < 2 && now_ms() < until) {
		int pe = ibv_start_poll(cq, &pa);
		if (pe == ENOENT)
			continue;
		do {
			uint64_t ts = ibv_wc_read_completion_ts(cq);
			uint64_t t0 = (uint64_t)before.tv_sec * 1000000000ull + (uint64_t)before.tv_nsec;
			if (got == 0)
				ok = ok && cq->wr_id == 1 && cq->status == IBV_WC_SUCCESS && ibv_wc_read_opcode(cq) == IBV_WC_RECV
				     && ibv_wc_read_byte_len(cq) == 100 && (ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM)
				     && ibv_wc_read_imm_data(cq) == htobe32(0xabcd) && ibv_wc_read_qp_num(cq) == b.qp->qp_num
				     && ibv_wc_read_src_qp(cq) == a.qp->qp_num && ts >= t0 && ts < t0 + 10000000000ull
				     && ibv_wc_read_completion_wallclock_ns(cq) > 1000000000ull * 1600000000ull;
			else
				ok = ok && cq->wr_id == 2 && !(ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM);
			got++;
		} while (got < 2 && ibv_next_poll(cq) == 0);
		ibv_end_poll(cq);
	}
	CHECK("poll-ex-reads-every-field-asked-for", !e && got == 2 && ok, "set-up %d, %d completions, fields right %d", e, got, ok);
	struct ibv_device_attr_ex dx;
	CHECK("query-device-ex-clock-and-timestamp-mask", ibv_query_device_ex(a.ctx, NULL, &dx) == 0 && dx.hca_core_clock == 1000000
							     && dx.completion_timestamp_mask == UINT64_MAX && dx.max_dm_size == 0
							     && (dx.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B)
							     && (dx.odp_caps.general_caps & IBV_ODP_SUPPORT),
	      "hca_core_clock %" PRIu64 " mask %" PRIx64, dx.hca_core_clock, dx.completion_timestamp_mask);
	CHECK("destroy-cq-in-use-is-ebusy", ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == EBUSY, "a CQ a queue pair completes into went");
	ibv_destroy_qp(b.qp);
	b.qp = NULL;
	CHECK("destroy-cq-ex", ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0, "destroying the extended CQ failed");
	init.recv_cq = b.cq;
	b.qp = ibv_create_qp(b.pd, &init);
	close_side(&a);
	close_side(&b);
}

/* A queue pair from ibv_create_qp_ex with send operations: the ibv_wr_* calls. */
static void extended_qp(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	CHECK("qp-to-qp-ex-of-a-plain-pair-is-null", ibv_qp_to_qp_ex(a.qp) == NULL, "a plain pair has an extended API");
	ibv_destroy_qp(a.qp);
	struct ibv_qp_init_attr_ex attr = {.send_cq = a.cq, .recv_cq = a.cq, .qp_type = IBV_QPT_RC, .pd = a.pd,
					   .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					   .send_ops_flags = IBV_QP_EX_WITH_TSO,
					   .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4, .max_inline_data = 64}};
	errno = 0;
	CHECK("qp-ex-refuses-send-ops-it-lacks", ibv_create_qp_ex(a.ctx, &attr) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
	attr.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ
			      | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	a.qp = ibv_create_qp_ex(a.ctx, &attr);
	struct ibv_qp_ex *x = a.qp ? ibv_qp_to_qp_ex(a.qp) : NULL;
	CHECK("create-qp-ex", a.qp && x, "%s", strerror(errno));
	if (!x) {
		a.qp = ibv_create_qp(a.pd, &(struct ibv_qp_init_attr){.send_cq = a.cq, .recv_cq = a.cq, .qp_type = IBV_QPT_RC,
									.cap = {.max_send_wr = 1, .max_recv_wr = 1}});
		close_side(&a);
		close_side(&b);
		return;
	}
	int e = connect_pair(&a, &b, 11, 12);
	memset(a.buf, 0x42, 8192);
	char message[] = "inline, copied when set";
	struct ibv_sge r = {(uintptr_t)b.buf + 65536, 4096, b.mr->lkey};
	e = e || post_recv(b.qp, 1, &r, 1);
	uint64_t *word = (uint64_t *)(b.buf + 128 * 1024);
	*word = 7;
	struct ibv_sge two[2] = {{(uintptr_t)a.buf, 100, a.mr->lkey}, {(uintptr_t)a.buf + 4096, 100, a.mr->lkey}};
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 8192);
	ibv_wr_set_sge_list(x, 2, two);
	x->wr_id = 2;
	ibv_wr_send_imm(x, htobe32(5));
	ibv_wr_set_inline_data(x, message, sizeof(message));
	memset(message, 0, sizeof(message)); /* the library copied it already */
	x->wr_id = 3;
	ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)word, 3);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 16384, 8);
	x->wr_id = 4;
	ibv_wr_rdma_read(x, b.mr->rkey, (uintptr_t)b.buf + 8192);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 20000, 200);
	e = e || ibv_wr_complete(x);
	struct ibv_wc wc[4], rc;
	int n = e ? 0 : poll_n(a.cq, wc, 4, 10000);
	int m = e ? 0 : poll_n(b.cq, &rc, 1, 10000);
	int ok = n == 4 && m == 1;
	for (int i = 0; i < n; i++)
		ok = ok && wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)(i + 1);
	ok = ok && rc.byte_len == sizeof(message) && !strcmp((char *)b.buf + 65536, "inline, copied when set") && *word == 10
	     && *(uint64_t *)(a.buf + 16384) == 7 && !memcmp(a.buf + 20000, b.buf + 8192, 200) && b.buf[8192 + 150] == 0x42;
	CHECK("wr-batch-posts-in-order", ok, "complete %d, %d sends %d receives", e, n, m);
	ibv_wr_start(x);
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
	struct ibv_sge five[5] = {two[0], two[1], two[0], two[1], two[0]};
	ibv_wr_set_sge_list(x, 5, five);
	CHECK("wr-batch-error-posts-nothing", ibv_wr_complete(x) == EINVAL && poll_n(a.cq, wc, 1, 300) == 0, "not EINVAL");
	ibv_wr_start(x);
	x->wr_id = 9;
	ibv_wr_send(x);
	ibv_wr_abort(x);
	CHECK("wr-abort-posts-nothing", ibv_wr_complete(x) == 0 && poll_n(a.cq, wc, 1, 300) == 0, "an aborted batch went out");
	close_side(&a);
	close_side(&b);
}

/* Memory windows: type 1 through ibv_bind_mw, type 2 through work requests; the NIC enforces both. */
static void memory_windows(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 0, 0);
	struct ibv_mr *bindable = ibv_reg_mr(b.pd, b.buf + 65536, 65536, ACCESS | IBV_ACCESS_MW_BIND);
	struct ibv_mw *one = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	struct ibv_mw *two = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK("alloc-mw", bindable && one && two, "%s", strerror(errno));
	if (!bindable || !one || !two) {
		close_side(&a);
		close_side(&b);
		return;
	}
	uint32_t before = one->rkey;
	struct ibv_mw_bind bind = {.wr_id = 50, .send_flags = IBV_SEND_SIGNALED,
				   .bind_info = {.mr = bindable, .addr = (uintptr_t)b.buf + 65536 + 4096, .length = 4096,
						 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
	e = e || ibv_bind_mw(b.qp, one, &bind);
	struct ibv_wc wc;
	int n = e ? 0 : poll_n(b.cq, &wc, 1, 10000);
	CHECK("bind-mw-type-1", n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && one->rkey != before,
	      "bind %d, %d completions, %s", e, n, n ? ibv_wc_status_str(wc.status) : "-");
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	e = post_send(a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf + 65536 + 4096, one->rkey, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("write-through-a-window", n == 1 && wc.status == IBV_WC_SUCCESS, "post %d, %d, %s", e, n, n ? ibv_wc_status_str(wc.status) : "-");
	e = post_send(a.qp, 2, IBV_WR_RDMA_READ, &sge, 1, (uintptr_t)b.buf + 65536 + 4096, one->rkey, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("read-through-a-write-only-window-refused", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "post %d, %d, %s", e, n,
	      n ? ibv_wc_status_str(wc.status) : "-");
	CHECK("dereg-mr-with-a-bound-window-refused", ibv_dereg_mr(bindable) != 0, "a region with a bound window was deregistered");
	close_side(&a);
	ibv_destroy_qp(b.qp);
	/* b again, with a fresh pair: a failed request put the last one in ERROR */
	open_side(&a, 0, 64, NULL);
	struct ibv_qp_init_attr init = {.send_cq = b.cq, .recv_cq = b.cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4}};
	b.qp = ibv_create_qp(b.pd, &init);
	e = connect_pair(&a, &b, 0, 0);
	uint32_t key2 = ibv_inc_rkey(two->rkey);
	struct ibv_send_wr bw = {.wr_id = 60, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
				 .bind_mw = {.mw = two, .rkey = key2, .bind_info = {.mr = bindable, .addr = (uintptr_t)b.buf + 65536, .length = 65536,
										  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ}}},
			   *badwr;
	e = e || ibv_post_send(b.qp, &bw, &badwr);
	n = e ? 0 : poll_n(b.cq, &wc, 1, 10000);
	CHECK("bind-mw-type-2-by-work-request", n == 1 && wc.status == IBV_WC_SUCCESS && two->rkey == key2, "post %d, %d, %s", e, n,
	      n ? ibv_wc_status_str(wc.status) : "-");
	e = post_send(a.qp, 3, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf + 65536, key2, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("write-through-a-type-2-window", n == 1 && wc.status == IBV_WC_SUCCESS, "post %d, %d", e, n);
	struct ibv_sge r = {(uintptr_t)b.buf, 64, b.mr->lkey};
	struct ibv_send_wr inv = {.wr_id = 4, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = key2};
	e = post_recv(b.qp, 70, &r, 1) || ibv_post_send(a.qp, &inv, &badwr);
	struct ibv_wc rc;
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	int m = e ? 0 : poll_n(b.cq, &rc, 1, 10000);
	CHECK("send-with-inv-invalidates-the-peers-window", n == 1 && m == 1 && wc.status == IBV_WC_SUCCESS && (rc.wc_flags & IBV_WC_WITH_INV)
								 && rc.invalidated_rkey == key2,
	      "post %d, %d/%d, flags 0x%x", e, n, m, m ? rc.wc_flags : 0);
	e = post_send(a.qp, 5, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf + 65536, key2, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("invalidated-window-refuses", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "post %d, %d, %s", e, n,
	      n ? ibv_wc_status_str(wc.status) : "-");
	CHECK("dealloc-pd-in-use-is-ebusy", ibv_dealloc_pd(b.pd) == EBUSY, "a PD with windows, registrations and a pair went");
	CHECK("dealloc-mw", ibv_dealloc_mw(one) == 0 && ibv_dealloc_mw(two) == 0, "deallocating the windows failed");
	CHECK("dereg-mr-once-windows-are-gone", ibv_dereg_mr(bindable) == 0, "the region stayed busy");
	close_side(&a);
	close_side(&b);
}

static void resources_in_use(void)
{
	struct side a;
	open_side(&a, 0, 64, make_srq);
	CHECK("destroy-srq-in-use-is-ebusy", ibv_destroy_srq(a.qp->srq) == EBUSY, "an SRQ a pair draws from went");
	struct ibv_srq_attr sa;
	CHECK("query-srq", ibv_query_srq(a.qp->srq, &sa) == 0 && sa.max_wr == 16 && sa.max_sge == 2, "max_wr %u max_sge %u", sa.max_wr,
	      sa.max_sge);
	sa.srq_limit = 17;
	CHECK("srq-limit-above-max-wr-refused", ibv_modify_srq(a.qp->srq, &sa, IBV_SRQ_LIMIT) == EINVAL, "a limit above max_wr was taken");
	close_side(&a);
}

/*
 * Posts go on the session's ring, a destroy through the node's socket: a pair destroyed right after a
 * burst of posts must take them first, as an HCA takes the WQEs posted before it destroys the pair.
 * A post that arrived after the destroy would be refused (the library says so on stderr, which the
 * test that runs this reads); here each round only has to destroy cleanly.
 */
static void destroy_after_posts(void)
{
	int ok = 1;
	for (int round = 0; round < 20 && ok; round++) {
		struct side a, b;
		open_side(&a, 0, 256, NULL);
		open_side(&b, 1, 256, NULL);
		if (connect_pair(&a, &b, 100, 200)) {
			CHECK("destroy-right-after-posts", 0, "connect failed");
			return;
		}
		for (int i = 0; i < 64; i++) {
			struct ibv_sge s = {.addr = (uintptr_t)b.buf + 64 * i, .length = 64, .lkey = b.mr->lkey};
			post_recv(b.qp, 1000 + i, &s, 1);
			struct ibv_sge w = {.addr = (uintptr_t)a.buf + 64 * i, .length = 64, .lkey = a.mr->lkey};
			post_send(a.qp, i, IBV_WR_RDMA_WRITE, &w, 1, (uintptr_t)b.buf + 64 * i, b.mr->rkey, 0);
		}
		ok = ibv_destroy_qp(a.qp) == 0 && ibv_destroy_qp(b.qp) == 0;
		a.qp = b.qp = NULL;
		close_side(&a);
		close_side(&b);
	}
	CHECK("destroy-right-after-posts", ok, "a destroy failed: %s", strerror(errno));
}

/* ibv_rereg_mr: access, protection domain and translation changed, then traffic through the new registration. */
static void rereg(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 0, 0);
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	struct ibv_wc wc;
	uint32_t old_rkey = b.mr->rkey;
	/* access: remote write taken away, so the peer's WRITE is refused (and that pair is in error) */
	int r = ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	e = e || r || post_send(a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	int n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("rereg-access-refuses-what-it-took-away", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "rereg %d, post %d, %d completions, %s",
	      r, e, n, n ? ibv_wc_status_str(wc.status) : "-");
	close_side(&a);
	open_side(&a, 0, 64, NULL);
	struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
	e = ibv_modify_qp(b.qp, &reset, IBV_QP_STATE) || connect_pair(&a, &b, 0, 0);
	sge.lkey = a.mr->lkey;
	r = ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ACCESS);
	memset(a.buf, 0x3c, 64);
	e = e || r || post_send(a.qp, 2, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, b.mr->rkey, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("rereg-access-gives-what-it-adds", n == 1 && wc.status == IBV_WC_SUCCESS && b.buf[63] == 0x3c, "rereg %d, post %d, %d "
	      "completions, %s", r, e, n, n ? ibv_wc_status_str(wc.status) : "-");
	if (b.mr->rkey != old_rkey) {
		e = post_send(a.qp, 3, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.buf, old_rkey, 0);
		n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
		CHECK("rereg-old-rkey-refused", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "post %d, %d completions, %s", e, n,
		      n ? ibv_wc_status_str(wc.status) : "-");
		close_side(&a);
		open_side(&a, 0, 64, NULL);
		e = ibv_modify_qp(b.qp, &reset, IBV_QP_STATE) || connect_pair(&a, &b, 0, 0);
		sge.lkey = a.mr->lkey;
	}
	/* translation: the registration now covers another buffer; the peer's WRITE lands there */
	uint8_t *other = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(other, 0, SIZE);
	r = ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, other, SIZE, 0);
	memset(a.buf, 0x6d, 128);
	sge.length = 128;
	e = e || r || post_send(a.qp, 4, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)other + 4096, b.mr->rkey, 0);
	n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("rereg-translation-moves-the-registration", n == 1 && wc.status == IBV_WC_SUCCESS && other[4096 + 127] == 0x6d && b.mr->addr == other,
	      "rereg %d, post %d, %d completions, %s", r, e, n, n ? ibv_wc_status_str(wc.status) : "-");
	/* protection domain: the region moves to a PD of its own; a send from it through a's pair (the old PD) is refused locally */
	struct ibv_pd *pd2 = ibv_alloc_pd(b.ctx);
	r = pd2 ? ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) : -1;
	struct ibv_sge bsge = {(uintptr_t)other, 64, b.mr->lkey};
	e = r || post_send(b.qp, 5, IBV_WR_RDMA_WRITE, &bsge, 1, (uintptr_t)a.buf, a.mr->rkey, 0);
	n = e ? 0 : poll_n(b.cq, &wc, 1, 10000);
	CHECK("rereg-pd-takes-the-region-from-the-old-pd", n == 1 && wc.status == IBV_WC_LOC_PROT_ERR && b.mr->pd == pd2, "rereg %d, post %d, "
	      "%d completions, %s", r, e, n, n ? ibv_wc_status_str(wc.status) : "-");
	ibv_dereg_mr(b.mr);
	b.mr = ibv_reg_mr(b.pd, b.buf, SIZE, ACCESS);
	if (pd2)
		ibv_dealloc_pd(pd2);
	munmap(other, SIZE);
	close_side(&a);
	close_side(&b);
}

/* ibv_resize_cq below what the CQ holds fails, as Soft-RoCE's rxe_cq_chk_attr has it; the CQ keeps its completions. */
static void resize_below_held(void)
{
	struct side a;
	open_side(&a, 0, 64, NULL);
	struct ibv_sge sge = {(uintptr_t)a.buf, 64, a.mr->lkey};
	int e = to_init(a.qp);
	for (int i = 0; i < 10 && !e; i++)
		e = post_recv(a.qp, (uint64_t)i, &sge, 1);
	/* ten receives flushed into the CQ by the move to ERROR, none polled */
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	e = e || ibv_req_notify_cq(a.cq, 0) || ibv_modify_qp(a.qp, &err, IBV_QP_STATE);
	/* the node flushes the ten at once: once the first is in the CQ, the rest are in the event ring behind it */
	e = e || !channel_event(&a, 10000);
	int r = e ? -1 : ibv_resize_cq(a.cq, 4);
	CHECK("resize-cq-below-held-fails", r == EINVAL, "set-up %d, ibv_resize_cq(4) with ten completions held returned %d", e, r);
	struct ibv_wc wc[10];
	int n = poll_n(a.cq, wc, 10, 10000);
	CHECK("resize-cq-refused-keeps-completions", n == 10 && wc[9].wr_id == 9 && wc[9].status == IBV_WC_WR_FLUSH_ERR,
	      "%d completions after the refused resize", n);
	CHECK("resize-cq-when-empty", ibv_resize_cq(a.cq, 16) == 0 && a.cq->cqe >= 16, "resize to 16 failed or cqe %d", a.cq->cqe);
	close_side(&a);
}

/* An atomic on a pair without remote atomic access completes with a remote access error. */
static void atomic_without_access(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	int e = to_init(a.qp) || ibv_modify_qp(b.qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
		|| to_rtr(&a, &b, 0, 1) || to_rtr(&b, &a, 0, 1) || to_rts(&a, 0, 14, 7, 7) || to_rts(&b, 0, 14, 7, 7);
	uint64_t *word = (uint64_t *)(b.buf + 4096);
	*word = 5;
	struct ibv_sge eight = {(uintptr_t)a.buf, 8, a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &eight, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED, .wr.atomic = {.remote_addr = (uintptr_t)word, .rkey = b.mr->rkey, .compare_add = 1}},
			   *bad;
	e = e || ibv_post_send(a.qp, &wr, &bad);
	struct ibv_wc wc;
	int n = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	CHECK("atomic-without-remote-atomic-access", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && *word == 5,
	      "set-up %d, %d completions, %s, word %" PRIu64, e, n, n ? ibv_wc_status_str(wc.status) : "-", *word);
	close_side(&a);
	close_side(&b);
}

/* A post to a full receive queue fails with ENOMEM and names the request; the queue takes posts again once one is used. */
static void receive_queue_full(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	int e = connect_pair(&a, &b, 0, 0);
	struct ibv_sge r = {(uintptr_t)b.buf, 64, b.mr->lkey};
	int posted = 0;
	while (!e && posted < 1000 && post_recv(b.qp, (uint64_t)posted, &r, 1) == 0)
		posted++;
	struct ibv_recv_wr wr = {.wr_id = 9999, .sg_list = &r, .num_sge = 1}, *bad = NULL;
	int full = ibv_post_recv(b.qp, &wr, &bad);
	CHECK("post-recv-to-a-full-queue-is-enomem", posted == 64 && full == ENOMEM && bad == &wr, "%d posted, then %d, bad %s", posted, full,
	      bad == &wr ? "the request" : "not the request");
	struct ibv_sge s = {(uintptr_t)a.buf, 64, a.mr->lkey};
	memset(a.buf, 0x11, 64);
	e = e || post_send(a.qp, 1, IBV_WR_SEND, &s, 1, 0, 0, 0);
	struct ibv_wc wc;
	int n = e ? 0 : poll_n(b.cq, &wc, 1, 10000);
	int again = n == 1 ? ibv_post_recv(b.qp, &wr, &bad) : -1;
	CHECK("full-receive-queue-stays-usable", n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 0 && again == 0,
	      "%d receives, then a post %d", n, again);
	close_side(&a);
	close_side(&b);
}

/* ---- UD ---- */

/* A UD pair on s (in RTS, Q_Key 0x11111111), its CQ an extended one when cq_ex, made through ibv_create_qp_ex when qp_ex. */
static struct ibv_qp *ud_pair(struct side *s, struct ibv_cq *cq, int qp_ex)
{
	struct ibv_qp *qp;
	if (qp_ex) {
		struct ibv_qp_init_attr_ex x = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .pd = s->pd,
						.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
						.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
						.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
		qp = ibv_create_qp_ex(s->ctx, &x);
	} else {
		struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
						.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
		qp = ibv_create_qp(s->pd, &init);
	}
	if (!qp)
		return NULL;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return NULL;
	return qp;
}

static int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, struct ibv_sge *sge, int n, uint64_t id, int flags)
{
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = sge, .num_sge = n, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED | flags,
				 .wr.ud = {.ah = ah, .remote_qpn = qpn, .remote_qkey = 0x11111111}},
			   *bad;
	return ibv_post_send(qp, &wr, &bad);
}

/* Zero-byte datagrams; datagrams through ibv_create_qp_ex and ibv_create_cq_ex; completion events on a UD pair's CQ. */
static void ud(void)
{
	struct side a, b;
	open_side(&a, 0, 64, NULL);
	open_side(&b, 1, 64, NULL);
	struct ibv_qp *qa = ud_pair(&a, a.cq, 0), *qb = ud_pair(&b, b.cq, 0);
	struct ibv_ah_attr aha = {.dlid = b.lid, .port_num = 1};
	struct ibv_ah *ah = ibv_create_ah(a.pd, &aha);
	int e = !qa || !qb || !ah;
	struct ibv_sge r = {(uintptr_t)b.buf, 40 + 256, b.mr->lkey};
	e = e || post_recv(qb, 1, &r, 1) || post_recv(qb, 2, &r, 1) || ibv_req_notify_cq(b.cq, 0);
	e = e || ud_send(qa, ah, qb ? qb->qp_num : 0, NULL, 0, 10, 0);
	struct ibv_wc wc;
	int sent = e ? 0 : poll_n(a.cq, &wc, 1, 10000);
	int woke = !e && channel_event(&b, 10000);
	int n = woke ? poll_n(b.cq, &wc, 1, 10000) : 0;
	CHECK("ud-zero-byte-send-arrives-as-grh-only", sent == 1 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 40
						      && wc.src_qp == qa->qp_num && wc.wr_id == 1,
	      "set-up %d, sent %d, woke %d, %d receives, byte_len %u", e, sent, woke, n, n ? wc.byte_len : 0);
	/* armed again, the next datagram wakes the channel too */
	struct ibv_sge s = {(uintptr_t)a.buf, 200, a.mr->lkey};
	memset(a.buf, 0x2b, 200);
	e = e || ibv_req_notify_cq(b.cq, 0) || ud_send(qa, ah, qb->qp_num, &s, 1, 11, 0);
	woke = !e && channel_event(&b, 10000);
	n = woke ? poll_n(b.cq, &wc, 1, 10000) : 0;
	CHECK("ud-completion-event-wakes-the-channel", woke && n == 1 && wc.byte_len == 240 && b.buf[40 + 199] == 0x2b, "woke %d, %d receives",
	      woke, n);
	poll_n(a.cq, &wc, 1, 1000);
	ibv_destroy_qp(qb);
	ibv_destroy_qp(qa);

	/* the extended API on both ends */
	struct ibv_cq_init_attr_ex cx = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID
								    | IBV_WC_EX_WITH_IMM};
	struct ibv_cq_ex *cqb = ibv_create_cq_ex(b.ctx, &cx);
	qa = ud_pair(&a, a.cq, 1);
	qb = cqb ? ud_pair(&b, ibv_cq_ex_to_cq(cqb), 1) : NULL;
	struct ibv_qp_ex *x = qa ? ibv_qp_to_qp_ex(qa) : NULL;
	e = !cqb || !qa || !qb || !x;
	e = e || post_recv(qb, 3, &r, 1);
	if (!e) {
		ibv_wr_start(x);
		x->wr_id = 12;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send_imm(x, htobe32(0x77));
		ibv_wr_set_ud_addr(x, ah, qb->qp_num, 0x11111111);
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 100);
		e = ibv_wr_complete(x);
	}
	int got = 0, ok = 0;
	uint64_t until = now_ms() + 10000;
	struct ibv_poll_cq_attr pa = {0};
	while (!e && !got && now_ms() < until) {
		if (ibv_start_poll(cqb, &pa) == ENOENT)
			continue;
		got = 1;
		ok = cqb->wr_id == 3 && cqb->status == IBV_WC_SUCCESS && ibv_wc_read_byte_len(cqb) == 140 && ibv_wc_read_src_qp(cqb) == qa->qp_num
		     && ibv_wc_read_slid(cqb) == a.lid && ibv_wc_read_imm_data(cqb) == htobe32(0x77);
		ibv_end_poll(cqb);
	}
	CHECK("ud-through-qp-ex-and-cq-ex", got && ok, "set-up %d, %d receives, fields right %d", e, got, ok);
	poll_n(a.cq, &wc, 1, 1000);
	if (qb)
		ibv_destroy_qp(qb);
	if (qa)
		ibv_destroy_qp(qa);
	if (cqb)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqb));
	if (ah)
		ibv_destroy_ah(ah);
	close_side(&a);
	close_side(&b);
}

/* The first node's address, as getifaddrs lists it (the interface pagewire0 when no interface of the host has it). */
static int node_address(struct sockaddr_in *out)
{
	struct ifaddrs *list = NULL;
	int found = 0;
	if (getifaddrs(&list))
		return 0;
	for (struct ifaddrs *i = list; i && !found; i = i->ifa_next) {
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, "pagewire0")) {
			*out = *(struct sockaddr_in *)i->ifa_addr;
			found = 1;
		}
	}
	freeifaddrs(list);
	return found;
}

/*
 * rdma_create_qp with the caller's SRQ: the pair draws from it, and rdma_destroy_ep leaves it to its owner
 * (librdmacm destroys only an SRQ rdma_create_srq made), who destroys it afterwards.
 */
static void cm_qp_with_callers_srq(void)
{
	struct sockaddr_in addr;
	if (!node_address(&addr)) {
		CHECK("cm-ep-leaves-the-callers-srq", 0, "getifaddrs lists no interface pagewire0");
		return;
	}
	addr.sin_port = 0;
	struct rdma_cm_id *id = NULL;
	int e = rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) || rdma_bind_addr(id, (struct sockaddr *)&addr) || !id->verbs;
	struct ibv_pd *pd = e ? NULL : ibv_alloc_pd(id->verbs);
	struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &srq_attr) : NULL;
	struct ibv_qp_init_attr qp_attr = {.srq = srq, .cap = {.max_send_wr = 4, .max_send_sge = 1}, .qp_type = IBV_QPT_RC};
	int created = srq && rdma_create_qp(id, pd, &qp_attr) == 0 && id->qp && id->qp->srq == srq;
	CHECK("cm-qp-draws-from-the-callers-srq", created, "set-up %d, pd %p, srq %p: %s", e, (void *)pd, (void *)srq, strerror(errno));
	if (id)
		rdma_destroy_ep(id);
	int destroyed = srq ? ibv_destroy_srq(srq) : -1;
	CHECK("cm-ep-leaves-the-callers-srq", destroyed == 0, "ibv_destroy_srq after rdma_destroy_ep: %d", destroyed);
	if (pd)
		ibv_dealloc_pd(pd);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{"modify", modify_table},
	{"error", error_flushes_in_order},
	{"retries", retries_end_requests},
	{"zero", zero_length_and_no_elements},
	{"sge", scatter_gather},
	{"fence", fence_and_atomics},
	{"solicited", solicited_events},
	{"overflow", cq_overflow},
	{"events", queue_pair_events},
	{"srq", last_wqe_reached},
	{"cq-ex", extended_cq},
	{"qp-ex", extended_qp},
	{"mw", memory_windows},
	{"in-use", resources_in_use},
	{"destroy", destroy_after_posts},
	{"rereg", rereg},
	{"resize", resize_below_held},
	{"atomic-access", atomic_without_access},
	{"rq-full", receive_queue_full},
	{"ud", ud},
	{"cm-srq", cm_qp_with_callers_srq},
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int n = 0;
	devices = ibv_get_device_list(&n);
	if (n < 2) {
		printf("FAIL devices: two Pagewire devices are needed (PAGEWIRE_NODE=A,B), found %d\n", n);
		return 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int wanted = argc == 1;
		for (int j = 1; j < argc; j++)
			wanted |= !strcmp(argv[j], cases[i].name);
		if (wanted)
			cases[i].run();
	}
	ibv_free_device_list(devices);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
