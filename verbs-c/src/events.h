/* events.c: the event ring and the session stream into the program's CQs and async events */
#ifndef PAGEWIRE_VERBS_EVENTS_H
#define PAGEWIRE_VERBS_EVENTS_H

#include "pw.h"

extern int pw_armed_cqs; /* CQs armed across contexts: the reader drains the event ring for them (events.c) */
struct pw_qp *pw_qp_of(struct pw_context *ctx, uint32_t qpn);
void pw_queue_async_event(struct pw_context *ctx, const struct ibv_async_event *ae);
void pw_drain(struct pw_context *ctx);
void pw_drain_all(struct pw_context *ctx);
void *pw_reader_main(void *arg);

#endif
