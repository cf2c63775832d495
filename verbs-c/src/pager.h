/* pager.c: pages the node takes back, the faults that bring them in, and writers held while bytes move */
#ifndef PAGEWIRE_VERBS_PAGER_H
#define PAGEWIRE_VERBS_PAGER_H

#include "pw.h"

int pw_pager_attach(struct pw_context *ctx);
void pw_pager_detach(struct pw_context *ctx);
void pw_cpu_unmap(struct pw_context *ctx, uint64_t address, uint64_t length);
void pw_unmap_for_node(struct pw_context *ctx, uint64_t first, uint64_t end);
uint64_t pw_away_pages(struct pw_context *ctx, uint64_t first, uint64_t end);
int pw_other_context_maps(struct pw_context *ctx, uint64_t first, uint64_t end);
/*
 * Holds the program's stores to [first, end) while the library moves the range's bytes between the
 * program's memory and the node's frames (a registration, a deregistration): a thread writing there
 * meanwhile waits (in the kernel with userfaultfd's write protection; else its write faults on the
 * read-only range and the pager holds it) until pw_thaw, instead of writing into bytes already copied;
 * reads go on. 0 when frozen; otherwise (a mapping that cannot be held) the caller copies unfrozen. pw_thaw after the range's mapping was replaced (replaced=1) or not.
 */
int pw_freeze(struct pw_context *ctx, uint64_t first, uint64_t end);
void pw_thaw(struct pw_context *ctx, uint64_t first, uint64_t end, int replaced);

#endif
