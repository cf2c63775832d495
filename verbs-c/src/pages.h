/* pages.c: the page book (extents, registrations' cover, the node's holds on pages, runs, private copies). */
#ifndef PAGEWIRE_PAGES_H
#define PAGEWIRE_PAGES_H

#include "pw.h"

int pw_runs_add(struct pw_runs *runs, uint64_t first, uint64_t end);
void pw_runs_free(struct pw_runs *runs);
/* The library maps [first, end) from the node's memory from now on (or until pw_extent_remove). */
int pw_extent_add(struct pw_context *ctx, uint64_t first, uint64_t end);
void pw_extent_remove(struct pw_context *ctx, uint64_t first, uint64_t end);
/* Whether the library maps `page` from the node's memory (or is about to, or is giving it back). */
int pw_extent_covers(struct pw_context *ctx, uint64_t page);
/* Whether a live (explicit) registration covers `page`. mr_lock held. */
int pw_covered(struct pw_context *ctx, uint64_t page);
/* The same, leaving `except` (a registration going away) out. mr_lock held. */
int pw_covered_except(struct pw_context *ctx, uint64_t page, struct pw_mr *except);
/* A MapCpuPages request for [first, end) of the endpoint `ref` names (no heap: the pager builds these too). */
Pagewire__Verbs__V1__MapCpuPagesRequest pw_map_request(Pagewire__Verbs__V1__EndpointRef *ref, uint64_t first, uint64_t end);
/* The node holds [first, end) for the program's CPU (release 0), or lets them go (1); the frames in *out. */
int pw_hold(struct pw_context *ctx, struct pw_conn *conn, uint64_t first, uint64_t end, int release,
	    Pagewire__Verbs__V1__MapCpuPagesResponse **out);
/* Holds one page on the pager's connection, without the heap: its frame in *frame. */
int pw_hold_one(struct pw_context *ctx, uint64_t page, uint32_t *frame);
/* Lets the node have [first, end) back (discard: and drop their bytes), on `conn`, without the heap. */
int pw_let_go(struct pw_context *ctx, struct pw_conn *conn, uint64_t first, uint64_t end, int discard);
/* Replaces [first, end) with private anonymous pages holding the same bytes, in one step, without the heap. */
int pw_private_copy(uint64_t first, uint64_t end);

#endif
