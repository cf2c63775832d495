/* What cm_node.c (the node, its event channels, the ids by number and their calls) gives the connection manager's other files. */
#ifndef PAGEWIRE_VERBS_CM_NODE_H
#define PAGEWIRE_VERBS_CM_NODE_H

#include "cm_objects.h"

/* Opens the control connection to the node the first device is, once; 0 or an errno. */
int cm_node_open(void);

/* One operation on an id; fills *reply_out when asked. Returns 0, or the errno librdmacm returns (logged). */
int cm_call(struct cm_id *id, Pagewire__Verbs__V1__CmCallRequest *req, Pagewire__Verbs__V1__CmCallResponse **reply_out);
/* ESTABLISH on the id; 0 or an errno. */
int cm_establish(struct cm_id *id);

/* A socket address as the calls carry it: the IP's bytes (pointing into `sa`) and the port; empty for no address. */
void cm_address_of(const struct sockaddr *sa, ProtobufCBinaryData *ip, uint32_t *port);
/* Sets the addresses of the id's route from an event's or a reply's (either may be absent). */
void cm_set_route(struct cm_id *id, const Pagewire__Verbs__V1__CmAddress *src, const Pagewire__Verbs__V1__CmAddress *dst);

/* A new id on the first device, not yet the node's (no number, not listed). */
struct cm_id *cm_id_new(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps, enum ibv_qp_type qp_type);
/* Frees an id and what its joins left. */
void cm_id_free(struct cm_id *id);
/* The id a connection request on `listen` makes, numbered `number` by the node, as its listen's; NULL when out of memory. */
struct cm_id *cm_request_id(struct cm_id *listen, uint32_t number);
int cm_ids_add(struct cm_id *id);
void cm_ids_remove(struct cm_id *id);
/* The live id with the node's `number`, or NULL. */
struct cm_id *cm_ids_find(uint32_t number);
/* The id is going (rdma_destroy_id): events for it are no longer the program's. */
void cm_id_destroyed(struct cm_id *id);

/* A channel's readers (rdma_get_cm_event): the last one out of a destroyed channel frees it. */
void cm_channel_reader_enters(struct cm_channel *chan);
void cm_channel_reader_leaves(struct cm_channel *chan);
/* Whether the channel was destroyed while this thread read it. */
int cm_channel_destroyed(struct cm_channel *chan);
void cm_channel_free(struct cm_channel *chan);

#endif
