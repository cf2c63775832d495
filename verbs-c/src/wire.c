/*
 * The node's verbs socket (the node's VerbsSocket): frames of [u32 length][u8 kind][body], each body a
 * message of the Verbs service, packed and unpacked with protobuf-c from the node's own verbs.proto.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pw.h"
#include "wire.h"

enum { CALL = 1, OPEN_SESSION = 2, SESSION_SEND = 3 };
enum { REPLY = 1, SESSION_EVENT = 3, SESSION_END = 4 };
#define MAX_FRAME (64u << 20)

static int conn_open(struct pw_conn *conn, const char *socket_path, int quiet)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(socket_path) >= sizeof(addr.sun_path)) {
		pw_log(PW_ERROR, "verbs socket path too long: %s", socket_path);
		return ENAMETOOLONG;
	}
	strcpy(addr.sun_path, socket_path);
	conn->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (conn->fd < 0)
		return errno;
	if (connect(conn->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;
		if (!quiet)
			pw_log(PW_ERROR, "cannot reach the node's verbs socket %s: %s (is the node running on this host, and is "
		       "PAGEWIRE_NODE or PAGEWIRE_VERBS_SOCKET right?)", socket_path, strerror(e));
		close(conn->fd);
		conn->fd = -1;
		return e;
	}
	pthread_mutex_init(&conn->lock, NULL);
	return 0;
}

int pw_conn_open(struct pw_conn *conn, const char *socket_path)
{
	return conn_open(conn, socket_path, 0);
}

int pw_conn_open_quiet(struct pw_conn *conn, const char *socket_path)
{
	return conn_open(conn, socket_path, 1);
}

void pw_conn_close(struct pw_conn *conn)
{
	if (conn->fd >= 0) {
		shutdown(conn->fd, SHUT_RDWR);
		close(conn->fd);
		conn->fd = -1;
	}
}

static int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				/* a program made the socket non-blocking (an rdma_cm channel's fd): the frame's rest is on its way */
				struct pollfd pfd = { .fd = fd, .events = POLLIN };
				poll(&pfd, 1, -1);
				continue;
			}
			return errno;
		}
		if (r == 0)
			return ECONNRESET;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Sends one frame: kind, an optional prefix, then a packed message. */
static int send_frame(int fd, uint8_t kind, const void *prefix, size_t prefix_len, const ProtobufCMessage *msg)
{
	size_t body = msg ? protobuf_c_message_get_packed_size(msg) : 0;
	size_t n = 4 + 1 + prefix_len + body;
	uint8_t stack[512];
	uint8_t *frame = n <= sizeof(stack) ? stack : malloc(n);
	if (!frame)
		return ENOMEM;
	uint32_t length = (uint32_t)(n - 4);
	memcpy(frame, &length, 4);
	frame[4] = kind;
	if (prefix_len)
		memcpy(frame + 5, prefix, prefix_len);
	if (msg)
		protobuf_c_message_pack(msg, frame + 5 + prefix_len);
	int e = write_all(fd, frame, n);
	if (frame != stack)
		free(frame);
	return e;
}

/* Reads one frame; *body is malloc'ed (kind first). */
static int read_frame(int fd, uint8_t **body, uint32_t *length)
{
	uint32_t n;
	int e = read_all(fd, &n, 4);
	if (e)
		return e;
	if (n < 1 || n > MAX_FRAME)
		return EPROTO;
	*body = malloc(n);
	if (!*body)
		return ENOMEM;
	e = read_all(fd, *body, n);
	if (e) {
		free(*body);
		return e;
	}
	*length = n;
	return 0;
}

int pw_errno_of_status(uint32_t code)
{
	switch (code) {
	case 3:  /* INVALID_ARGUMENT */
	case 11: /* OUT_OF_RANGE */
		return EINVAL;
	case 5:  /* NOT_FOUND */
		return ENOENT;
	case 7:  /* PERMISSION_DENIED */
	case 16: /* UNAUTHENTICATED */
		return EACCES;
	case 8:  /* RESOURCE_EXHAUSTED */
		return ENOMEM;
	case 9:  /* FAILED_PRECONDITION */
		return EINVAL;
	case 12: /* UNIMPLEMENTED */
		return EOPNOTSUPP;
	case 14: /* UNAVAILABLE */
		return EAGAIN;
	case 4:  /* DEADLINE_EXCEEDED */
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

int pw_call(struct pw_conn *conn, const char *method, const ProtobufCMessage *request,
	    const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply)
{
	size_t name_len = strlen(method);
	uint8_t prefix[2 + 64];
	if (name_len > 64)
		return EINVAL;
	uint16_t n16 = (uint16_t)name_len;
	memcpy(prefix, &n16, 2);
	memcpy(prefix + 2, method, name_len);
	pthread_mutex_lock(&conn->lock);
	uint8_t *body = NULL;
	uint32_t length = 0;
	int e = send_frame(conn->fd, CALL, prefix, 2 + name_len, request);
	if (!e)
		e = read_frame(conn->fd, &body, &length);
	pthread_mutex_unlock(&conn->lock);
	if (e) {
		pw_log(PW_ERROR, "%s: the node's verbs socket failed: %s", method, strerror(e));
		return e;
	}
	if (length < 5 || body[0] != REPLY) {
		free(body);
		pw_log(PW_ERROR, "%s: the node answered with a malformed frame", method);
		return EPROTO;
	}
	uint32_t code;
	memcpy(&code, body + 1, 4);
	if (code != 0) {
		/*
		 * RESOURCE_EXHAUSTED (8) is often passing (reclaim is getting pages back) and middleware retries it (UCX grows
		 * its pools again and again), so a method's first one is said with the node's reason, which names the setting
		 * to raise, and the rest only at debug.
		 */
		int level = PW_WARN;
		if (code == 8) {
			static const char *said[32]; /* methods already said (a race says one twice at worst) */
			level = PW_DEBUG;
			for (int i = 0; i < 32; i++) {
				if (said[i] && !strcmp(said[i], method))
					break;
				if (!said[i]) {
					said[i] = method;
					level = PW_WARN;
					break;
				}
			}
		}
		pw_log(level, "%s refused by the node: %.*s", method, (int)(length - 5), (const char *)body + 5);
		free(body);
		return pw_errno_of_status(code);
	}
	*reply = protobuf_c_message_unpack(reply_desc, NULL, length - 5, body + 5);
	free(body);
	if (!*reply) {
		pw_log(PW_ERROR, "%s: cannot unpack the node's answer", method);
		return EPROTO;
	}
	return 0;
}

int pw_session_open(struct pw_conn *conn)
{
	return send_frame(conn->fd, OPEN_SESSION, NULL, 0, NULL);
}

int pw_session_send(struct pw_conn *conn, const Pagewire__Verbs__V1__SessionRequest *request)
{
	pthread_mutex_lock(&conn->lock);
	int e = send_frame(conn->fd, SESSION_SEND, NULL, 0, &request->base);
	pthread_mutex_unlock(&conn->lock);
	return e;
}

int pw_stream_open(struct pw_conn *conn, const char *method)
{
	size_t n = strlen(method);
	uint8_t prefix[2 + 64];
	if (n > 64)
		return EINVAL;
	uint16_t len = (uint16_t)n;
	memcpy(prefix, &len, 2);
	memcpy(prefix + 2, method, n);
	return send_frame(conn->fd, OPEN_SESSION, prefix, 2 + n, NULL);
}

int pw_stream_next(struct pw_conn *conn, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **message)
{
	uint8_t *body;
	uint32_t length;
	int e = read_frame(conn->fd, &body, &length);
	if (e)
		return e;
	*message = NULL;
	if (body[0] == SESSION_EVENT) {
		*message = protobuf_c_message_unpack(desc, NULL, length - 1, body + 1);
		e = *message ? 0 : EPROTO;
	} else if ((body[0] == SESSION_END || body[0] == REPLY) && length >= 5) {
		uint32_t code;
		memcpy(&code, body + 1, 4);
		if (code != 0)
			pw_log(PW_ERROR, "the node ended the stream: %.*s", (int)(length - 5), (const char *)body + 5);
		e = code ? pw_errno_of_status(code) : ECONNRESET;
	} else {
		e = EPROTO;
	}
	free(body);
	return e;
}

Pagewire__Verbs__V1__SessionEvent *pw_session_next(struct pw_conn *conn)
{
	uint8_t *body;
	uint32_t length;
	if (read_frame(conn->fd, &body, &length))
		return NULL;
	Pagewire__Verbs__V1__SessionEvent *event = NULL;
	if (body[0] == SESSION_EVENT) {
		event = pagewire__verbs__v1__session_event__unpack(NULL, length - 1, body + 1);
	} else if (body[0] == SESSION_END && length >= 5) {
		uint32_t code;
		memcpy(&code, body + 1, 4);
		if (code != 0)
			pw_log(PW_ERROR, "the node ended the session: %.*s", (int)(length - 5), (const char *)body + 5);
	}
	free(body);
	return event;
}

/* A bump allocator over a caller's buffer: answers unpacked without the heap (the pager's). */
struct arena {
	uint8_t *at;
	size_t left;
};

static void *arena_alloc(void *data, size_t size)
{
	struct arena *a = data;
	size = (size + 15) & ~(size_t)15;
	if (size > a->left)
		return NULL;
	void *p = a->at;
	a->at += size;
	a->left -= size;
	return p;
}

static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p;
}

int pw_call_in(struct pw_conn *conn, const char *method, const ProtobufCMessage *request, const ProtobufCMessageDescriptor *reply_desc,
	       uint8_t *buffer, size_t size, ProtobufCMessage **reply)
{
	size_t name_len = strlen(method);
	uint8_t prefix[2 + 64];
	if (name_len > 64 || size < 64)
		return EINVAL;
	uint16_t n16 = (uint16_t)name_len;
	memcpy(prefix, &n16, 2);
	memcpy(prefix + 2, method, name_len);
	pthread_mutex_lock(&conn->lock);
	uint32_t n = 0;
	int e = send_frame(conn->fd, CALL, prefix, 2 + name_len, request);
	if (!e)
		e = read_all(conn->fd, &n, 4);
	if (!e && (n < 5 || n > size / 2))
		e = EPROTO; /* the frame cannot be read on: the connection is useless now */
	if (!e)
		e = read_all(conn->fd, buffer, n);
	pthread_mutex_unlock(&conn->lock);
	if (e) {
		pw_log(PW_ERROR, "%s: the node's verbs socket failed: %s", method, strerror(e));
		return e;
	}
	if (buffer[0] != REPLY)
		return EPROTO;
	uint32_t code;
	memcpy(&code, buffer + 1, 4);
	if (code != 0) {
		pw_log(code == 8 ? PW_DEBUG : PW_WARN, "%s refused by the node: %.*s", method, (int)(n - 5), (const char *)buffer + 5);
		return pw_errno_of_status(code);
	}
	/* The arena starts at the first 16-byte boundary after the frame: unpacked structs need their alignment. */
	size_t skip = (size_t)((16 - ((uintptr_t)(buffer + n) & 15)) & 15);
	if (n + skip > size)
		return EPROTO;
	struct arena a = { buffer + n + skip, size - n - skip };
	ProtobufCAllocator allocator = { .alloc = arena_alloc, .free = arena_free, .allocator_data = &a };
	*reply = protobuf_c_message_unpack(reply_desc, &allocator, n - 5, buffer + 5);
	return *reply ? 0 : EPROTO;
}

int pw_call_void(struct pw_conn *conn, const char *method, const ProtobufCMessage *request, const ProtobufCMessageDescriptor *reply_desc)
{
	ProtobufCMessage *reply = NULL;
	int e = pw_call(conn, method, request, reply_desc, &reply);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	return e;
}
