/*
 * Devices and contexts: the devices PAGEWIRE_NODE names, opening one (a session with its node, the
 * session's rings, the node's memory, the reader and the pager), the queries (device, port, GID,
 * P_Key) and the strings libibverbs programs link against.
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
#include "rdma_private.h"
#include "cq.h"
#include "events.h"
#include "memory.h"
#include "pager.h"
#include "pd.h"
#include "post.h"
#include "qp.h"
#include "ring.h"
#include "settings.h"
#include "trace.h"
#include "wire.h"

/* verbs.h makes these macros around inline helpers; the library defines the functions themselves. */
#undef ibv_query_port

/* ---- devices ----------------------------------------------------------------------------------- */

static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static struct pw_device devices[PW_MAX_DEVICES];
static int device_count;

static void find_devices(void)
{
	const struct pw_settings *settings = pw_settings();
	const char *dir = settings->ring_directory;
	const char *socket_override = settings->socket;
	char list[1024];
	snprintf(list, sizeof(list), "%s", settings->nodes);
	char *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t && device_count < PW_MAX_DEVICES; t = strtok_r(NULL, ",", &save)) {
		struct pw_device *d = &devices[device_count];
		memset(d, 0, sizeof(*d));
		snprintf(d->target, sizeof(d->target), "%s", t);
		if (device_count == 0 && socket_override && *socket_override) {
			snprintf(d->socket_path, sizeof(d->socket_path), "%s", socket_override);
		} else if (strchr(t, '/')) {
			snprintf(d->socket_path, sizeof(d->socket_path), "%s", t); /* the socket itself */
		} else {
			/* HOST:PORT names the node by its port, anything else by its id: the node's socket has both names */
			const char *port = strrchr(t, ':');
			snprintf(d->socket_path, sizeof(d->socket_path), "%s/pagewire-%s.verbs", dir, port ? port + 1 : t);
		}
		d->device.node_type = IBV_NODE_CA;
		d->device.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->device.name, sizeof(d->device.name), "pagewire%d", device_count);
		snprintf(d->device.dev_name, sizeof(d->device.dev_name), "uverbs%d", device_count);
		memcpy(d->device.dev_path, d->socket_path, sizeof(d->device.dev_path) - 1);
		memcpy(d->device.ibdev_path, d->socket_path, sizeof(d->device.ibdev_path) - 1);
		device_count++;
	}
}

EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	pthread_once(&devices_once, find_devices);
	struct ibv_device **list = calloc((size_t)device_count + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < device_count; i++)
		list[i] = &devices[i].device;
	if (num_devices)
		*num_devices = device_count;
	return list;
}

EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	uint64_t index = (uint64_t)((struct pw_device *)device - devices);
	return htobe64(0x0250570000000000ull | (index + 1)); /* "PW" */
}

EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return (int)((struct pw_device *)device - devices);
}

/* ---- opening a device: the session, its rings and the node's memory ------------------------------ */

static Pagewire__Verbs__V1__SessionEvent *expect(struct pw_context *ctx, Pagewire__Verbs__V1__SessionEvent__EventCase which)
{
	for (;;) {
		Pagewire__Verbs__V1__SessionEvent *ev = pw_session_next(&ctx->session);
		if (!ev || ev->event_case == which)
			return ev;
		protobuf_c_message_free_unpacked(&ev->base, NULL);
	}
}

static int attach_rings(struct pw_context *ctx)
{
	Pagewire__Verbs__V1__SessionRequest req = PAGEWIRE__VERBS__V1__SESSION_REQUEST__INIT;
	Pagewire__Verbs__V1__AttachRings attach = PAGEWIRE__VERBS__V1__ATTACH_RINGS__INIT;
	req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_ATTACH_RINGS;
	req.attach_rings = &attach;
	int e = pw_session_send(&ctx->session, &req);
	if (e)
		return e;
	Pagewire__Verbs__V1__SessionEvent *ev = expect(ctx, PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_RINGS_OFFERED);
	if (!ev)
		return ECONNRESET;
	if (!*ev->rings_offered->path) {
		pw_log(PW_ERROR, "the node offers no rings: %s", ev->rings_offered->refusal);
		protobuf_c_message_free_unpacked(&ev->base, NULL);
		return EOPNOTSUPP;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s", ev->rings_offered->path);
	protobuf_c_message_free_unpacked(&ev->base, NULL);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	Pagewire__Verbs__V1__RingsAttached attached = PAGEWIRE__VERBS__V1__RINGS_ATTACHED__INIT;
	if (fd >= 0) {
		off_t size = lseek(fd, 0, SEEK_END);
		void *base = size > 128 ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
		close(fd);
		if (base != MAP_FAILED) {
			ctx->rings_base = base;
			ctx->rings_bytes = (size_t)size;
		}
	}
	if (!ctx->rings_base) {
		attached.failure = "cannot map the ring file";
	} else {
		int32_t capacity;
		memcpy(&attached.nonce, ctx->rings_base + PW_RINGS_NONCE, 8);
		memcpy(&capacity, ctx->rings_base + PW_RINGS_CAPACITY, 4);
		pw_ring_init(&ctx->requests, ctx->rings_base + PW_RINGS_HEADER, capacity);
		pw_ring_init(&ctx->events, ctx->rings_base + PW_RINGS_HEADER + capacity + PW_RING_TRAILER, capacity);
	}
	req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_RINGS_ATTACHED;
	req.rings_attached = &attached;
	e = pw_session_send(&ctx->session, &req);
	if (e || !ctx->rings_base)
		return e ? e : EIO;
	ev = expect(ctx, PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_RINGS_ACTIVE);
	if (!ev)
		return ECONNRESET;
	if (!*ev->rings_active->memory_path) {
		pw_log(PW_ERROR, "the node does not share its memory (its physical memory is not in a file programs can map)");
		protobuf_c_message_free_unpacked(&ev->base, NULL);
		return EOPNOTSUPP;
	}
	e = pw_memory_attach(ctx, ev->rings_active->memory_path);
	protobuf_c_message_free_unpacked(&ev->base, NULL);
	if (e)
		return e;
	/* The bell: a Unix socket beside the ring file. */
	char bell[600];
	snprintf(bell, sizeof(bell), "%s.bell", path);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	ctx->bell_fd = -1;
	if (strlen(bell) < sizeof(addr.sun_path)) {
		strcpy(addr.sun_path, bell);
		int b = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (b >= 0 && connect(b, (struct sockaddr *)&addr, sizeof(addr)) == 0)
			ctx->bell_fd = b;
		else if (b >= 0)
			close(b);
	}
	return 0;
}

static struct ibv_context_ops context_ops;
static int pw_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr, size_t attr_len);
static int pw_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr,
			      size_t attr_size);

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct pw_device *dev = (struct pw_device *)device;
	struct pw_context *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->dev = dev;
	ctx->memory_fd = -1;
	ctx->bell_fd = -1;
	ctx->control.fd = ctx->session.fd = ctx->pager_conn.fd = -1;
	pthread_mutex_init(&ctx->post_lock, NULL);
	pthread_mutex_init(&ctx->event_lock, NULL);
	pthread_mutex_init(&ctx->qp_lock, NULL);
	pthread_mutexattr_t recursive;
	pthread_mutexattr_init(&recursive);
	pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&ctx->mr_lock, &recursive);
	pthread_mutex_init(&ctx->fault_lock, &recursive);
	pthread_mutex_init(&ctx->extent_lock, NULL);
	int e = pw_conn_open(&ctx->control, dev->socket_path);
	if (!e)
		e = pw_conn_open(&ctx->session, dev->socket_path);
	if (!e)
		e = pw_session_open(&ctx->session);
	if (!e) {
		Pagewire__Verbs__V1__SessionRequest req = PAGEWIRE__VERBS__V1__SESSION_REQUEST__INIT;
		Pagewire__Verbs__V1__OpenSession open_session = PAGEWIRE__VERBS__V1__OPEN_SESSION__INIT;
		char name[64];
		snprintf(name, sizeof(name), "verbs-%d", (int)getpid());
		open_session.name = name;
		req.request_case = PAGEWIRE__VERBS__V1__SESSION_REQUEST__REQUEST_OPEN;
		req.open = &open_session;
		e = pw_session_send(&ctx->session, &req);
	}
	if (!e) {
		Pagewire__Verbs__V1__SessionEvent *ev = expect(ctx, PAGEWIRE__VERBS__V1__SESSION_EVENT__EVENT_OPENED);
		if (!ev) {
			e = ECONNREFUSED;
		} else {
			ctx->endpoint_id = ev->opened->endpoint_id;
			ctx->session_key = ev->opened->session_key;
			ctx->page_size = ev->opened->page_size;
			snprintf(ctx->node_id, sizeof(ctx->node_id), "%s", ev->opened->node_id);
			pw_trace_node(ctx->node_id);
			protobuf_c_message_free_unpacked(&ev->base, NULL);
		}
	}
	if (!e) {
		Pagewire__Verbs__V1__DescribeNodeRequest req = PAGEWIRE__VERBS__V1__DESCRIBE_NODE_REQUEST__INIT;
		e = pw_call(&ctx->control, "DescribeNode", &req.base, &pagewire__verbs__v1__describe_node_response__descriptor,
			    (ProtobufCMessage **)&ctx->node);
		if (!e) {
			ctx->lid = ctx->node->lid;
			ctx->mtu = ctx->node->mtu;
			ctx->initial_credits = ctx->node->initial_credits;
		}
	}
	if (!e)
		e = attach_rings(ctx);
	if (!e && pipe2(ctx->async_pipe, O_CLOEXEC) < 0)
		e = errno;
	if (e) {
		pw_log(PW_ERROR, "cannot open %s on node %s: %s", device->name, dev->target, strerror(e));
		pw_conn_close(&ctx->session);
		pw_conn_close(&ctx->control);
		if (ctx->node)
			protobuf_c_message_free_unpacked(&ctx->node->base, NULL);
		free(ctx);
		errno = e;
		return NULL;
	}
	struct ibv_context *c = &ctx->vctx.context;
	c->device = device;
	c->ops = context_ops;
	c->cmd_fd = ctx->session.fd;
	c->async_fd = ctx->async_pipe[0];
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.query_port = pw_query_port;
	ctx->vctx.query_device_ex = pw_query_device_ex;
	ctx->vctx.advise_mr = pw_advise_mr;
	ctx->vctx.modify_qp_rate_limit = pw_modify_qp_rate_limit;
	ctx->vctx.create_cq_ex = pw_create_cq_ex;
	ctx->vctx.create_qp_ex = pw_create_qp_ex;
	if (pw_pager_attach(ctx) != 0)
		pw_log(PW_WARN, "%s: pages the node takes back cannot be brought in again; registered memory stays as it is", device->name);
	if (pthread_create(&ctx->reader, NULL, pw_reader_main, ctx) == 0)
		ctx->reader_started = 1;
	pw_log(PW_INFO, "%s: session %u on node %s (LID %u) through %s", device->name, ctx->endpoint_id, ctx->node_id, ctx->lid,
	       dev->socket_path);
	return c;
}

EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct pw_context *ctx = pw_ctx(context);
	pw_log(PW_INFO,
	       "%s: session %u closes; its empty CQ polls slept on the bell %lu times, %lu of them woken by it; "
	       "it rang the node on its session stream %lu times",
	       context->device->name, ctx->endpoint_id, (unsigned long)__atomic_load_n(&ctx->poll_sleeps, __ATOMIC_RELAXED),
	       (unsigned long)__atomic_load_n(&ctx->poll_wakes, __ATOMIC_RELAXED),
	       (unsigned long)__atomic_load_n(&ctx->stream_doorbells, __ATOMIC_RELAXED));
	pw_memory_close(ctx); /* registered pages back to the program first, while the node still serves faults */
	pw_pager_detach(ctx);
	ctx->closing = 1;
	shutdown(ctx->session.fd, SHUT_RDWR); /* the node ends the session: queue pairs, pins and memory go */
	if (ctx->reader_started)
		pthread_join(ctx->reader, NULL);
	pw_conn_close(&ctx->session);
	pw_conn_close(&ctx->control);
	if (ctx->bell_fd >= 0)
		close(ctx->bell_fd);
	if (ctx->rings_base)
		munmap(ctx->rings_base, ctx->rings_bytes);
	close(ctx->async_pipe[0]);
	close(ctx->async_pipe[1]);
	if (ctx->node)
		protobuf_c_message_free_unpacked(&ctx->node->base, NULL);
	pw_table_free(&ctx->qps);
	pw_table_free(&ctx->srqs);
	pw_table_free(&ctx->mrs);
	/* PDs the program did not deallocate go with the context, as the kernel's go with the device file. */
	for (struct pw_pd *pd = ctx->pds, *next; pd; pd = next) {
		next = pd->next;
		free(pd);
	}
	free(ctx);
	return 0;
}

/* ---- queries ------------------------------------------------------------------------------------ */

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

static void device_attr(struct pw_context *ctx, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "pagewire-0.1");
	a->node_guid = htobe64(0x0250570000000000ull | ctx->lid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ull << 46;
	a->page_size_cap = ctx->page_size;
	a->vendor_id = 0x5057;
	a->vendor_part_id = 1;
	a->hw_ver = 1;
	a->max_qp = 1 << 16;
	a->max_qp_wr = PW_MAX_WR;
	/* What a program may rely on: RNR NAKs, resizable SRQs, cur_qp_state, memory windows of both types (2 as 2B). */
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CURR_QP_STATE_MOD | IBV_DEVICE_MEM_WINDOW
			      | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = PW_MAX_SGE;
	a->max_sge_rd = PW_MAX_SGE;
	a->max_cq = 1 << 16;
	a->max_cqe = PW_MAX_CQE;
	a->max_mr = 1 << 20;
	a->max_mw = 1 << 20;
	a->max_pd = 1 << 16;
	a->max_ah = 1 << 16;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 1 << 16;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = 1 << 16;
	a->max_srq_wr = PW_MAX_WR;
	a->max_srq_sge = PW_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	device_attr(pw_ctx(context), attr);
	return 0;
}

static int pw_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr,
			      size_t attr_size)
{
	if (input && input->comp_mask)
		return EINVAL;
	struct ibv_device_attr_ex full;
	memset(&full, 0, sizeof(full));
	device_attr(pw_ctx(context), &full.orig_attr);
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
	/* Completion timestamps are the host's CLOCK_MONOTONIC in nanoseconds: a 1 GHz clock (kHz here). */
	full.completion_timestamp_mask = UINT64_MAX;
	full.hca_core_clock = 1000000;
	/* ibv_modify_qp_rate_limit paces RC pairs (kbps). */
	full.packet_pacing_caps.qp_rate_limit_min = 1;
	full.packet_pacing_caps.qp_rate_limit_max = UINT32_MAX;
	full.packet_pacing_caps.supported_qpts = 1 << IBV_QPT_RC | 1 << IBV_QPT_UC;
	full.phys_port_cnt_ex = 1;
	/* ON_DEMAND: NIC page faults on every RC operation, and implicit (whole address space) registrations. */
	full.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC
		      | IBV_ODP_SUPPORT_SRQ_RECV;
	full.odp_caps.per_transport_caps.rc_odp_caps = rc;
	full.xrc_odp_caps = 0;
	full.max_dm_size = 0;
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	return 0;
}

static int pw_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr, size_t attr_len)
{
	struct pw_context *ctx = pw_ctx(context);
	if (port_num != 1)
		return EINVAL;
	struct ibv_port_attr a;
	memset(&a, 0, sizeof(a));
	a.state = ctx->port_down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = mtu_enum(ctx->mtu);
	a.gid_tbl_len = 1;
	a.port_cap_flags = 0;
	a.max_msg_sz = 1u << 31;
	a.pkey_tbl_len = 1;
	a.lid = (uint16_t)ctx->lid;
	a.sm_lid = (uint16_t)ctx->lid;
	a.lmc = 0;
	a.max_vl_num = 1;
	a.sm_sl = 0;
	a.subnet_timeout = 18;
	a.init_type_reply = 0;
	a.active_width = 2; /* 4X */
	a.active_speed = 32; /* EDR-like; the link is whatever gRPC moves */
	a.phys_state = ctx->port_down ? 3 : 5; /* Disabled, or LinkUp */
	a.link_layer = IBV_LINK_LAYER_INFINIBAND;
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return pw_query_port(context, port_num, (struct ibv_port_attr *)port_attr, sizeof(struct ibv_port_attr));
}

static void gid_of(struct pw_context *ctx, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[0] = 0xfe;
	gid->raw[1] = 0x80;
	uint64_t guid = 0x0250570000000000ull | ctx->lid;
	uint64_t be = htobe64(guid);
	memcpy(gid->raw + 8, &be, 8);
}

EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	if (port_num != 1 || index != 0)
		return -1;
	gid_of(pw_ctx(context), gid);
	return 0;
}

EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index, struct ibv_gid_entry *entry,
			     uint32_t flags, size_t entry_size)
{
	(void)flags;
	if (port_num != 1 || gid_index != 0)
		return EINVAL;
	struct ibv_gid_entry e;
	memset(&e, 0, sizeof(e));
	gid_of(pw_ctx(context), &e.gid);
	e.gid_index = 0;
	e.port_num = 1;
	e.gid_type = IBV_GID_TYPE_IB;
	memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
	return 0;
}

EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries, size_t max_entries, uint32_t flags,
				    size_t entry_size)
{
	if (flags)
		return -EINVAL;
	if (max_entries < 1)
		return -EINVAL; /* the port's one GID does not fit */
	int e = _ibv_query_gid_ex(context, 1, 0, entries, 0, entry_size);
	return e ? -e : 1;
}

/* libibverbs' private ibv_query_gid_type, which ibv_devinfo calls: every GID here is an InfiniBand one (sysfs type 0). */
EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, enum ibv_gid_type_sysfs *type)
{
	(void)context;
	if (port_num != 1 || index != 0)
		return EINVAL;
	*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	(void)context;
	if (port_num != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	(void)context;
	return port_num == 1 && pkey == htobe16(0xffff) ? 0 : -1;
}

/* ---- strings and helpers programs link against --------------------------------------------------- */

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof(names) / sizeof(names[0]) && names[status])
		return names[status];
	return "unknown";
}

EXPORT const char *ibv_port_state_str(enum ibv_port_state state)
{
	static const char *const names[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
	return (unsigned)state < 6 ? names[state] : "unknown";
}

EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	switch (node_type) {
	case IBV_NODE_CA:
		return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH:
		return "InfiniBand switch";
	case IBV_NODE_ROUTER:
		return "InfiniBand router";
	case IBV_NODE_RNIC:
		return "iWARP NIC";
	default:
		return "unknown";
	}
}

EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	switch (event) {
	case IBV_EVENT_CQ_ERR:
		return "CQ error";
	case IBV_EVENT_QP_FATAL:
		return "local work queue catastrophic error";
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return "SRQ limit reached";
	case IBV_EVENT_DEVICE_FATAL:
		return "local catastrophic error";
	case IBV_EVENT_PORT_ACTIVE:
		return "port active";
	default:
		return "unknown";
	}
}

/*
 * An address handle lives in the library, as mlx5's address vectors do: each UD SEND carries its LID
 * to the node, which sends the datagram to the node answering to it (none: dropped and counted, as a
 * fabric loses a packet to an unassigned LID), or, for a multicast LID (0xC000 and up), to every
 * node, whose pairs attached to the group take it. A global handle with no LID takes it from the
 * GID, whose GUID ends in the LID (see gid_of).
 */
EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!pd || !attr || (attr->port_num != 1 && attr->port_num != 0)) {
		errno = EINVAL;
		return NULL;
	}
	uint16_t dlid = attr->dlid;
	if (!dlid && attr->is_global) {
		uint64_t be, guid;
		memcpy(&be, attr->grh.dgid.raw + 8, 8);
		guid = be64toh(be);
		if ((guid & ~0xffffull) == 0x0250570000000000ull)
			dlid = (uint16_t)(guid & 0xffff);
	}
	if (dlid == 0 || dlid == 0xffff) {
		pw_log(PW_WARN, "ibv_create_ah: LID %u is no port's or group's (a global handle's GID %s a Pagewire port's)", dlid,
		       attr->is_global ? "is not" : "was not given for");
		errno = EINVAL;
		return NULL;
	}
	struct pw_ah *ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->dlid = dlid;
	ah->global = attr->is_global;
	pw_pd_use(pd, 1);
	return &ah->ah;
}

EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	if (!ibah)
		return EINVAL;
	pw_pd_use(ibah->pd, -1);
	free((struct pw_ah *)ibah);
	return 0;
}

static struct ibv_context_ops context_ops = {
	.poll_cq = pw_poll_cq,
	.req_notify_cq = pw_req_notify_cq,
	.post_srq_recv = pw_post_srq_recv,
	.post_send = pw_post_send,
	.post_recv = pw_post_recv,
	.alloc_mw = pw_alloc_mw,
	.bind_mw = pw_bind_mw,
	.dealloc_mw = pw_dealloc_mw,
};
