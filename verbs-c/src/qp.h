/* qp.c: queue pairs and shared receive queues */
#ifndef PAGEWIRE_VERBS_QP_H
#define PAGEWIRE_VERBS_QP_H

#include "pw.h"

struct ibv_srq *pw_srq_of(struct pw_context *ctx, uint32_t id);
int pw_modify_qp_rate_limit(struct ibv_qp *ibqp, struct ibv_qp_rate_limit_attr *attr);
struct ibv_qp *pw_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);

#endif
