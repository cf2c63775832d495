/* memory.c: registered pages as the node's frames at the program's addresses */
#ifndef PAGEWIRE_VERBS_MEMORY_H
#define PAGEWIRE_VERBS_MEMORY_H

#include "pw.h"

int pw_memory_attach(struct pw_context *ctx, const char *memory_path);
struct ibv_mr *pw_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access);
int pw_dereg_mr(struct ibv_mr *mr);
/* ibv_rereg_mr: the region registered anew (new keys) with what changes, then the old one dropped. */
int pw_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access);
void pw_memory_close(struct pw_context *ctx);
int pw_memory_ensure(struct pw_context *ctx, uint32_t lkey, uint64_t addr, uint64_t length);

/* Verbs' access flags as the node's list (at most five). */
Pagewire__Verbs__V1__Access *pw_access_list(unsigned int access, size_t *n, Pagewire__Verbs__V1__Access out[5]);

#endif
