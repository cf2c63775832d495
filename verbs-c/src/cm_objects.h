/*
 * The library's views of librdmacm's objects, which the connection manager's files share (cm.c: the node,
 * channels, ids, addresses and connecting; cm_events.c: events as the program sees them; cm_multicast.c:
 * groups; cm_qp.c: the queue pairs of ids; cm_endpoint.c: rdma_getaddrinfo and the synchronous endpoint
 * API), as rxe.h holds rxe's. What each file gives the others is in its own header (cm.h, cm_qp.h,
 * cm_multicast.h). rsocket.c builds rsockets on their public calls.
 */
#ifndef PAGEWIRE_VERBS_CM_OBJECTS_H
#define PAGEWIRE_VERBS_CM_OBJECTS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "pw.h"

#define CM_CALL "CmCall"
#define MAX_PRIVATE_DATA 196 /* the REQ's private data (the largest the IB CM carries) */
#define DEFAULT_ACK_TIMEOUT 14 /* 4.096 us x 2^14, librdmacm's default for RC */

struct cm_channel {
	struct rdma_event_channel channel; /* first: what programs hold */
	struct pw_conn conn; /* the CmChannel stream; its fd is channel.fd */
	uint64_t id, key;
	pthread_mutex_t read_lock; /* one reader of the stream at a time */
	int readers; /* threads inside rdma_get_cm_event, under cm_lock */
	int destroyed; /* rdma_destroy_event_channel was called while one was, under cm_lock */
};

struct cm_id {
	struct rdma_cm_id id; /* first: what programs hold */
	uint32_t number; /* the node's */
	int sync; /* created without a channel: a private one, operations wait for their event */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int events_reported, events_completed;
	/* the connection: the peer's side, as the events gave it */
	uint32_t peer_lid, peer_qpn, peer_psn, peer_qkey;
	uint32_t psn; /* this side's first PSN */
	uint8_t responder_resources, initiator_depth, retry_count, rnr_retry_count;
	uint8_t ack_timeout;
	int cqs_made; /* rdma_create_qp made the CQs (and their channels) */
	struct ibv_qp_init_attr *listen_attr; /* rdma_create_ep on a passive id: the QP each request's id gets */
	int destroyed;
	struct cm_group *groups; /* the multicast groups joined (rdma_join_multicast), newest first */
};

/* A multicast group an id joined: its address, the LID and GID every node maps it to, the program's context. */
struct cm_group {
	uint8_t ip[16];
	size_t ip_len;
	uint16_t lid;
	union ibv_gid mgid;
	void *context;
	int attached; /* the id's pair was attached when MULTICAST_JOIN came */
	struct cm_group *next;
};

struct cm_event {
	struct rdma_cm_event event; /* first: what programs hold */
	struct cm_id *counted; /* the id the event is reported against (the listen for CONNECT_REQUEST) */
	uint8_t private_data[256];
};

static inline int cm_fail(int e)
{
	errno = e;
	return -1;
}

#endif
