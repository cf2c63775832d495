/* wire.c: the node's verbs socket (calls, the session stream, other streams) and what a failed call's status means */
#ifndef PAGEWIRE_VERBS_WIRE_H
#define PAGEWIRE_VERBS_WIRE_H

#include "pw.h"

int pw_conn_open(struct pw_conn *conn, const char *socket_path);
/* As pw_conn_open, without a log line when the node is not there (for a probe that does without it). */
int pw_conn_open_quiet(struct pw_conn *conn, const char *socket_path);
void pw_conn_close(struct pw_conn *conn);

/*
 * One unary call: packs `request` (a protobuf-c message), sends it as method `method` and unpacks the
 * answer with `reply_desc` into *reply (free it with protobuf_c_message_free_unpacked).
 * Returns 0, or an errno value with the node's reason logged.
 */
int pw_call(struct pw_conn *conn, const char *method, const ProtobufCMessage *request,
	    const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply);

/*
 * As pw_call, with nothing from the heap: the answer is read into `buffer` and unpacked in what is left
 * of it (nothing to free). What the pager thread calls with, which must never take the malloc's locks.
 */
int pw_call_in(struct pw_conn *conn, const char *method, const ProtobufCMessage *request, const ProtobufCMessageDescriptor *reply_desc,
	       uint8_t *buffer, size_t size, ProtobufCMessage **reply);

/* A call whose answer carries nothing the caller needs. */
int pw_call_void(struct pw_conn *conn, const char *method, const ProtobufCMessage *request, const ProtobufCMessageDescriptor *reply_desc);

/* The session stream: opens it, sends a SessionRequest, reads the next SessionEvent (NULL at the end). */
int pw_session_open(struct pw_conn *conn);
int pw_session_send(struct pw_conn *conn, const Pagewire__Verbs__V1__SessionRequest *request);
Pagewire__Verbs__V1__SessionEvent *pw_session_next(struct pw_conn *conn);

/* Another of the node's bidirectional streams (CmChannel): opens it; reads its next message (0, or ECONNRESET at its end, or an errno). */
int pw_stream_open(struct pw_conn *conn, const char *method);
int pw_stream_next(struct pw_conn *conn, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **message);

/* Maps a failed call's gRPC code to the errno libibverbs would return. */
int pw_errno_of_status(uint32_t code);

#endif
