/*
 * The rest of what libibverbs exports, so that no call falls through to the real library (which would
 * run on Pagewire's objects): the helpers that are pure computation (rates, the kernel ABI's struct
 * copies, address handles from a completion), fork ranges, sysfs, and the verbs Soft-RoCE's provider
 * does not implement either, which fail as libibverbs fails them there (EOPNOTSUPP: its dummy ops). The
 * libibverbs 1.0 ABI (IBVERBS_1.0, for binaries of 2006) is answered ENOSYS.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "pw.h"
#include "rdma_private.h"
#include "settings.h"
#include "stack.h"
#include "wire.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- rates ------------------------------------------------------------------------------------------ */

EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	switch (rate) {
	case IBV_RATE_2_5_GBPS: return 1;
	case IBV_RATE_5_GBPS: return 2;
	case IBV_RATE_10_GBPS: return 4;
	case IBV_RATE_20_GBPS: return 8;
	case IBV_RATE_30_GBPS: return 12;
	case IBV_RATE_40_GBPS: return 16;
	case IBV_RATE_60_GBPS: return 24;
	case IBV_RATE_80_GBPS: return 32;
	case IBV_RATE_120_GBPS: return 48;
	case IBV_RATE_28_GBPS: return 11;
	case IBV_RATE_50_GBPS: return 20;
	case IBV_RATE_400_GBPS: return 160;
	case IBV_RATE_600_GBPS: return 240;
	case IBV_RATE_800_GBPS: return 320;
	case IBV_RATE_1200_GBPS: return 480;
	default: return -1;
	}
}

EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	switch (mult) {
	case 1: return IBV_RATE_2_5_GBPS;
	case 2: return IBV_RATE_5_GBPS;
	case 4: return IBV_RATE_10_GBPS;
	case 8: return IBV_RATE_20_GBPS;
	case 12: return IBV_RATE_30_GBPS;
	case 16: return IBV_RATE_40_GBPS;
	case 24: return IBV_RATE_60_GBPS;
	case 32: return IBV_RATE_80_GBPS;
	case 48: return IBV_RATE_120_GBPS;
	case 11: return IBV_RATE_28_GBPS;
	case 20: return IBV_RATE_50_GBPS;
	case 160: return IBV_RATE_400_GBPS;
	case 240: return IBV_RATE_600_GBPS;
	case 320: return IBV_RATE_800_GBPS;
	case 480: return IBV_RATE_1200_GBPS;
	default: return IBV_RATE_MAX;
	}
}

/* Each rate's Mbit/s, as the InfiniBand and Ethernet link speeds define them (the 64b/66b lanes' odd figures included). */
static const struct {
	enum ibv_rate rate;
	int mbps;
} RATES[] = {
	{ IBV_RATE_2_5_GBPS, 2500 }, { IBV_RATE_5_GBPS, 5000 }, { IBV_RATE_10_GBPS, 10000 }, { IBV_RATE_20_GBPS, 20000 },
	{ IBV_RATE_30_GBPS, 30000 }, { IBV_RATE_40_GBPS, 40000 }, { IBV_RATE_60_GBPS, 60000 }, { IBV_RATE_80_GBPS, 80000 },
	{ IBV_RATE_120_GBPS, 120000 }, { IBV_RATE_14_GBPS, 14062 }, { IBV_RATE_56_GBPS, 56250 }, { IBV_RATE_112_GBPS, 112500 },
	{ IBV_RATE_168_GBPS, 168750 }, { IBV_RATE_25_GBPS, 25781 }, { IBV_RATE_100_GBPS, 103125 }, { IBV_RATE_200_GBPS, 206250 },
	{ IBV_RATE_300_GBPS, 309375 }, { IBV_RATE_28_GBPS, 28125 }, { IBV_RATE_50_GBPS, 53125 }, { IBV_RATE_400_GBPS, 425000 },
	{ IBV_RATE_600_GBPS, 637500 }, { IBV_RATE_800_GBPS, 850000 }, { IBV_RATE_1200_GBPS, 1275000 },
};

EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof(RATES) / sizeof(RATES[0]); i++)
		if (RATES[i].rate == rate)
			return RATES[i].mbps;
	return -1;
}

EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < sizeof(RATES) / sizeof(RATES[0]); i++)
		if (RATES[i].mbps == mbps)
			return RATES[i].rate;
	return IBV_RATE_MAX;
}

/* ---- the kernel ABI's structs (what librdmacm and others convert with) ------------------------------ */

EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

#define COPY_PATH_FIELDS(dst, src)                                                                   \
	do {                                                                                         \
		(dst)->dlid = (src)->dlid;                                                           \
		(dst)->slid = (src)->slid;                                                           \
		(dst)->raw_traffic = (src)->raw_traffic;                                             \
		(dst)->flow_label = (src)->flow_label;                                               \
		(dst)->hop_limit = (src)->hop_limit;                                                 \
		(dst)->traffic_class = (src)->traffic_class;                                         \
		(dst)->reversible = (src)->reversible;                                               \
		(dst)->numb_path = (src)->numb_path;                                                 \
		(dst)->pkey = (src)->pkey;                                                           \
		(dst)->sl = (src)->sl;                                                               \
		(dst)->mtu_selector = (src)->mtu_selector;                                           \
		(dst)->mtu = (src)->mtu;                                                             \
		(dst)->rate_selector = (src)->rate_selector;                                         \
		(dst)->rate = (src)->rate;                                                           \
		(dst)->packet_life_time = (src)->packet_life_time;                                   \
		(dst)->preference = (src)->preference;                                               \
		(dst)->packet_life_time_selector = (src)->packet_life_time_selector;                 \
	} while (0)

EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	COPY_PATH_FIELDS(dst, src);
}

EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
	COPY_PATH_FIELDS(dst, src);
}

/* ---- address handles from a completion -------------------------------------------------------------- */

EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh,
			       struct ibv_ah_attr *ah_attr)
{
	(void)context;
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		/* The answer goes back to where the request came from: the GRH's source is the new destination. */
		uint32_t flow = be32toh(grh->version_tclass_flow);
		if ((flow >> 28) != 6) {
			errno = EINVAL;
			return -1;
		}
		ah_attr->is_global = 1;
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.flow_label = flow & 0xfffff;
		ah_attr->grh.traffic_class = (uint8_t)((flow >> 20) & 0xff);
		ah_attr->grh.hop_limit = 0xff;
		ah_attr->grh.sgid_index = 0;
	}
	return 0;
}

EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr, uint8_t eth_mac[6], uint16_t *vid)
{
	(void)context;
	(void)attr;
	(void)eth_mac;
	(void)vid;
	errno = EINVAL; /* the port is InfiniBand: there is no Ethernet address to resolve */
	return -1;
}

/* ---- multicast: a UD queue pair joins a group by its LID (the node delivers every datagram to the group to it) ---- */

static int attach_on_node(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid, int detach)
{
	if (qp->qp_type != IBV_QPT_UD) {
		pw_log(PW_INFO, "ibv_%s_mcast: queue pair %u is not UD; only UD queue pairs join multicast groups", detach ? "detach" : "attach",
		       qp->qp_num);
		return EINVAL;
	}
	struct pw_context *ctx = pw_ctx(qp->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__AttachMulticastRequest req = PAGEWIRE__VERBS__V1__ATTACH_MULTICAST_REQUEST__INIT;
	req.endpoint = &ref;
	req.qpn = qp->qp_num;
	req.lid = lid;
	req.gid.data = (uint8_t *)(gid ? gid->raw : NULL);
	req.gid.len = gid ? sizeof(gid->raw) : 0;
	req.detach = detach;
	return pw_call_void(&ctx->control, "AttachMulticast", &req.base, &pagewire__verbs__v1__attach_multicast_response__descriptor);
}

EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return attach_on_node(qp, gid, lid, 0);
}

EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return attach_on_node(qp, gid, lid, 1);
}

/* ---- fork: the library gives a child its own copies whatever is asked (pager.c) -------------------- */

EXPORT int ibv_fork_init(void)
{
	return 0;
}

EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	/* As on a kernel that copies pinned pages at fork: nothing a program must do. */
	return IBV_FORK_UNNEEDED;
}

EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* ---- sysfs: a Pagewire device has none ---------------------------------------------------------------- */

/* libibverbs' answer where SYSFS_PATH is not set; rdma-core's own libraries (librdmacm, the providers) call it. */
EXPORT const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/*
 * No file of a Pagewire device is in sysfs. rdma-core's librdmacm reads the rdma_cm ABI version here when it
 * starts: it is running over this library's verbs instead of the library's own connection manager, so it is
 * told how to start the program (it then fails its own call, as on a host without rdma_cm).
 */
EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	(void)dir;
	(void)buf;
	(void)size;
	if (file && strstr(file, "rdma_cm"))
		pw_refuse_mixed_stack("rdma-core's librdmacm asked for the rdma_cm device");
	errno = ENOENT;
	return -1;
}

/* Registers a provider with libibverbs: the library is the only provider of its devices. */
EXPORT void ibv_register_driver(const char *name, ibv_driver_init_func_1_1 init_func)
{
	(void)init_func;
	pw_log(PW_INFO, "ibv_register_driver(%s): ignored; the Pagewire verbs library serves its own devices only", name ? name : "?");
}

/* ---- what Soft-RoCE does not do either --------------------------------------------------------------- */

EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	pw_log(PW_INFO, "ibv_reg_dmabuf_mr: device memory of other devices cannot be a Pagewire node's");
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	/* SHADOW places parked parts of a message after later ones: no ordering is promised, as Soft-RoCE promises none. */
	return 0;
}

/* ---- the libibverbs 1.0 ABI: its structs predate every program built since 2006 ---------------------- */

#define ABI_1_0(name)                                                                                \
	EXPORT long name##_1_0(void);                                                                \
	EXPORT long name##_1_0(void)                                                                 \
	{                                                                                            \
		pw_log(PW_ERROR, #name "@IBVERBS_1.0: the libibverbs 1.0 ABI (2006) is not provided; " \
		       "rebuild the program against a current libibverbs");                          \
		errno = ENOSYS;                                                                      \
		return 0;                                                                            \
	}                                                                                            \
	__asm__(".symver " #name "_1_0, " #name "@IBVERBS_1.0")

ABI_1_0(ibv_get_device_list);
ABI_1_0(ibv_free_device_list);
ABI_1_0(ibv_get_device_name);
ABI_1_0(ibv_get_device_guid);
ABI_1_0(ibv_open_device);
ABI_1_0(ibv_close_device);
ABI_1_0(ibv_get_async_event);
ABI_1_0(ibv_ack_async_event);
ABI_1_0(ibv_query_device);
ABI_1_0(ibv_query_port);
ABI_1_0(ibv_query_gid);
ABI_1_0(ibv_query_pkey);
ABI_1_0(ibv_alloc_pd);
ABI_1_0(ibv_dealloc_pd);
ABI_1_0(ibv_reg_mr);
ABI_1_0(ibv_dereg_mr);
ABI_1_0(ibv_create_cq);
ABI_1_0(ibv_resize_cq);
ABI_1_0(ibv_destroy_cq);
ABI_1_0(ibv_get_cq_event);
ABI_1_0(ibv_ack_cq_events);
ABI_1_0(ibv_create_srq);
ABI_1_0(ibv_modify_srq);
ABI_1_0(ibv_query_srq);
ABI_1_0(ibv_destroy_srq);
ABI_1_0(ibv_create_qp);
ABI_1_0(ibv_query_qp);
ABI_1_0(ibv_modify_qp);
ABI_1_0(ibv_destroy_qp);
ABI_1_0(ibv_create_ah);
ABI_1_0(ibv_destroy_ah);
ABI_1_0(ibv_attach_mcast);
ABI_1_0(ibv_detach_mcast);
ABI_1_0(ibv_register_driver);
