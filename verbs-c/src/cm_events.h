/* What cm_events.c (the node's events as the program's, and the waits on them) gives the connection manager's other files. */
#ifndef PAGEWIRE_VERBS_CM_EVENTS_H
#define PAGEWIRE_VERBS_CM_EVENTS_H

#include "cm_objects.h"

/* A synchronous id's operation: reads the event it leads to into id->event (acknowledging the one before). */
int cm_complete(struct cm_id *id);
/* Waits until every event reported for the id was acknowledged, as librdmacm's destroy and migrate do. */
void cm_wait_for_acks(struct cm_id *id);

#endif
