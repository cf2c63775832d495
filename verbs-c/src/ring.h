/* ring.c: Agrona many-to-one ring buffers, as the ring module lays them out */
#ifndef PAGEWIRE_VERBS_RING_H
#define PAGEWIRE_VERBS_RING_H

#include "pw.h"

void pw_ring_init(struct pw_ring *ring, uint8_t *at, int32_t capacity);
/* Reserves a record of `length` bytes of type `type`; returns its body (write it, then pw_ring_commit) or NULL when full. */
uint8_t *pw_ring_claim(struct pw_ring *ring, int32_t type, int32_t length, int32_t *index);
void pw_ring_commit(struct pw_ring *ring, int32_t index, int32_t length);
typedef void (*pw_ring_handler)(void *arg, int32_t type, const uint8_t *body, int32_t length);
/* Reads up to `limit` records, in order; returns how many. One reader at a time. */
int pw_ring_read(struct pw_ring *ring, pw_ring_handler handler, void *arg, int limit);
/* Whether a record is committed at the ring's head (a hint for a reader about to sleep). */
int pw_ring_pending(struct pw_ring *ring);

#endif
