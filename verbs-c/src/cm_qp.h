/* What cm_qp.c (an id's queue pair through librdmacm's states, and the CQs rdma_create_qp made) gives the other files. */
#ifndef PAGEWIRE_VERBS_CM_QP_H
#define PAGEWIRE_VERBS_CM_QP_H

#include "cm_objects.h"

uint32_t cm_random_psn(void);
int cm_qp_to_rtr(struct cm_id *id);
int cm_qp_to_rts(struct cm_id *id);
void cm_qp_to_error(struct cm_id *id);
void cm_destroy_cqs(struct cm_id *id);

#endif
