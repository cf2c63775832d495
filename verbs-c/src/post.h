/* post.c: work requests and receives into the request ring, and the node's bell */
#ifndef PAGEWIRE_VERBS_POST_H
#define PAGEWIRE_VERBS_POST_H

#include "pw.h"

void pw_ring_node(struct pw_context *ctx);
int pw_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int pw_post_send_as(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad, int type1_bind);
int pw_wr_init(struct pw_qp *qp);
void pw_wr_free(struct pw_qp *qp);
int pw_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int pw_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int pw_post_receives(struct pw_context *ctx, uint32_t qpn, uint32_t srq_id, uint32_t max_sge, uint32_t *posted, uint32_t depth,
		     struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

#endif
