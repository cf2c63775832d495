/*
 * What cm.c (the node's control connection, event channels, ids and their calls) gives the connection
 * manager's other files.
 */
#ifndef PAGEWIRE_VERBS_CM_H
#define PAGEWIRE_VERBS_CM_H

#include "cm_objects.h"

/* One operation on an id; fills *reply_out when asked. Returns 0, or the errno librdmacm returns (logged). */
int cm_call(struct cm_id *id, Pagewire__Verbs__V1__CmCallRequest *req, Pagewire__Verbs__V1__CmCallResponse **reply_out);
/* A socket address as the calls carry it: the IP's bytes (pointing into `sa`) and the port; empty for no address. */
void cm_address_of(const struct sockaddr *sa, ProtobufCBinaryData *ip, uint32_t *port);
/* The live id with the node's `number`, or NULL. */
struct cm_id *cm_ids_find(uint32_t number);
/* The id a connection request on `listen` makes, numbered `number` by the node, as its listen's; NULL when out of memory. */
struct cm_id *cm_request_id(struct cm_id *listen, uint32_t number);
/* A synchronous id's operation: reads the event it leads to into id->event (acknowledging the one before). */
int cm_complete(struct cm_id *id);
/* Waits until every event reported for the id was acknowledged, as librdmacm's destroy and migrate do. */
void cm_wait_for_acks(struct cm_id *id);
/* Sets the addresses of the id's route from an event's or a reply's (either may be absent). */
void cm_set_route(struct cm_id *id, const Pagewire__Verbs__V1__CmAddress *src, const Pagewire__Verbs__V1__CmAddress *dst);

/* cm_events.c: the node's event as the program's, or NULL for an event the program does not see (its id is gone). */
struct cm_event *cm_event_convert(const Pagewire__Verbs__V1__CmIdEvent *e);

#endif
