/* cq.c: completion queues and how their polls wait */
#ifndef PAGEWIRE_VERBS_CQ_H
#define PAGEWIRE_VERBS_CQ_H

#include "pw.h"

void pw_cq_push(struct pw_context *ctx, struct pw_cq *cq, const struct ibv_wc *wc, int solicited, uint64_t time_ns);
struct ibv_cq_ex *pw_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);
int pw_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc);
int pw_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);

#endif
