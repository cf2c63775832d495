/* What cm_multicast.c (rdma_join_multicast and rdma_leave_multicast) gives the connection manager's other files. */
#ifndef PAGEWIRE_VERBS_CM_MULTICAST_H
#define PAGEWIRE_VERBS_CM_MULTICAST_H

#include "cm_objects.h"

/* MULTICAST_JOIN for `group`: the event gets the group's address handle and context, and the id's pair is attached. */
void cm_multicast_joined(struct cm_id *id, const Pagewire__Verbs__V1__CmAddress *group, struct rdma_cm_event *event);

#endif
