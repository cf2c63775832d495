/*
 * Protection domains and the verbs of memory registration (memory.c does the work of mapping a
 * registered buffer to the node's frames), and ibv_advise_mr.
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
#include "memory.h"
#include "pd.h"
#include "post.h"
#include "settings.h"
#include "wire.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* ---- protection domains and memory ------------------------------------------------------------------ */

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	static uint32_t handles;
	struct pw_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = context;
	pd->pd.handle = __atomic_add_fetch(&handles, 1, __ATOMIC_RELAXED);
	struct pw_context *ctx = pw_ctx(context);
	pthread_mutex_lock(&ctx->qp_lock);
	pd->next = ctx->pds;
	if (ctx->pds)
		ctx->pds->prev = pd;
	ctx->pds = pd;
	pthread_mutex_unlock(&ctx->qp_lock);
	return &pd->pd;
}

/* ibv_dealloc_pd: EBUSY while a registration, queue pair, SRQ or memory window still uses it, as libibverbs says. */
EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct pw_pd *p = (struct pw_pd *)pd;
	if (__atomic_load_n(&p->users, __ATOMIC_ACQUIRE) > 0)
		return EBUSY;
	struct pw_context *ctx = pw_ctx(pd->context);
	pthread_mutex_lock(&ctx->qp_lock);
	if (p->prev)
		p->prev->next = p->next;
	else
		ctx->pds = p->next;
	if (p->next)
		p->next->prev = p->prev;
	pthread_mutex_unlock(&ctx->qp_lock);
	free(p);
	return 0;
}

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return pw_reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return pw_reg_mr(pd, addr, length, iova, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return pw_reg_mr(pd, addr, length, iova, access);
}

EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return pw_rereg_mr(mr, flags, pd, addr, length, access);
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return pw_dereg_mr(mr);
}

int pw_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list,
			uint32_t num_sges)
{
	struct pw_context *ctx = pw_ctx(pd->context);
	(void)flags; /* IBV_ADVISE_MR_FLAG_FLUSH: every prefetch here finishes before the call returns */
	Pagewire__Verbs__V1__AdviseRequest__Advice a;
	switch (advice) {
	case IBV_ADVISE_MR_ADVICE_PREFETCH: a = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__ADVICE__PREFETCH; break;
	case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE: a = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__ADVICE__PREFETCH_WRITE; break;
	case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: a = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__ADVICE__PREFETCH_NO_FAULT; break;
	default: return EOPNOTSUPP;
	}
	for (uint32_t i = 0; i < num_sges; i++) {
		Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
		Pagewire__Verbs__V1__AdviseRequest req = PAGEWIRE__VERBS__V1__ADVISE_REQUEST__INIT;
		req.endpoint = &ref;
		req.lkey = sg_list[i].lkey;
		req.address = sg_list[i].addr;
		req.length = sg_list[i].length;
		req.advice = a;
		int e = pw_memory_ensure(ctx, sg_list[i].lkey, sg_list[i].addr, sg_list[i].length);
		if (!e)
			e = pw_call_void(&ctx->control, "Advise", &req.base, &pagewire__verbs__v1__advise_response__descriptor);
		if (e)
			return e;
	}
	return 0;
}

/* ---- memory windows ------------------------------------------------------------------------------ */

/* ibv_alloc_mw: a window of the node's, unbound; type 1 is bound by ibv_bind_mw, type 2 by a work request. */
struct ibv_mw *pw_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	struct pw_context *ctx = pw_ctx(pd->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__AllocateWindowRequest req = PAGEWIRE__VERBS__V1__ALLOCATE_WINDOW_REQUEST__INIT;
	req.endpoint = &ref;
	req.type = type == IBV_MW_TYPE_1 ? 1 : 2;
	Pagewire__Verbs__V1__AllocateWindowResponse *reply = NULL;
	int e = pw_call(&ctx->control, "AllocateWindow", &req.base, &pagewire__verbs__v1__allocate_window_response__descriptor,
			(ProtobufCMessage **)&reply);
	if (e) {
		errno = e;
		return NULL;
	}
	struct ibv_mw *mw = calloc(1, sizeof(*mw));
	if (!mw) {
		Pagewire__Verbs__V1__DeallocateWindowRequest drop = PAGEWIRE__VERBS__V1__DEALLOCATE_WINDOW_REQUEST__INIT;
		drop.endpoint = &ref;
		drop.rkey = reply->rkey;
		pw_call_void(&ctx->control, "DeallocateWindow", &drop.base, &pagewire__verbs__v1__deallocate_window_response__descriptor);
		protobuf_c_message_free_unpacked(&reply->base, NULL);
		errno = ENOMEM;
		return NULL;
	}
	mw->context = pd->context;
	mw->pd = pd;
	mw->rkey = reply->rkey;
	mw->handle = reply->rkey >> 8;
	mw->type = type;
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	pw_pd_use(pd, 1);
	return mw;
}

int pw_dealloc_mw(struct ibv_mw *mw)
{
	struct pw_context *ctx = pw_ctx(mw->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__DeallocateWindowRequest req = PAGEWIRE__VERBS__V1__DEALLOCATE_WINDOW_REQUEST__INIT;
	req.endpoint = &ref;
	req.rkey = mw->rkey;
	int e = pw_call_void(&ctx->control, "DeallocateWindow", &req.base, &pagewire__verbs__v1__deallocate_window_response__descriptor);
	if (e)
		return e;
	pw_pd_use(mw->pd, -1);
	free(mw);
	return 0;
}

/*
 * ibv_bind_mw: binds a type 1 window through the queue pair's send queue (a zero length, or no MR,
 * unbinds it); the window takes its next key at once, as Soft-RoCE's does, and the bind completes as
 * IBV_WC_BIND_MW in its place.
 */
int pw_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	if (mw->type != IBV_MW_TYPE_1 || qp->pd != mw->pd || (mw_bind->bind_info.mr && mw_bind->bind_info.mr->pd != mw->pd))
		return EINVAL;
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	if (!wr.bind_mw.bind_info.mr)
		wr.bind_mw.bind_info.length = 0;
	return pw_post_send_as(qp, &wr, &bad, 1);
}
