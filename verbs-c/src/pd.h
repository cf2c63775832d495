/* pd.c: protection domains, memory windows and advice on regions */
#ifndef PAGEWIRE_VERBS_PD_H
#define PAGEWIRE_VERBS_PD_H

#include "pw.h"

struct ibv_mw *pw_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int pw_dealloc_mw(struct ibv_mw *mw);
int pw_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
int pw_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);

#endif
