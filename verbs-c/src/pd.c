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

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* ---- protection domains and memory ------------------------------------------------------------------ */

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	static uint32_t handles;
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = context;
	pd->handle = __atomic_add_fetch(&handles, 1, __ATOMIC_RELAXED);
	return pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
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

