/*
 * pagewire-rsocket-check: rsockets' stream semantics as a sockets program relies on them, between a
 * server and a client on two nodes (librdmacm's rsocket.h, through whichever librdmacm is loaded):
 *   pagewire-rsocket-check server ADDRESS PORT     # on one node: accepts, runs its half of each case
 *   pagewire-rsocket-check client ADDRESS PORT     # on the other: connects to ADDRESS and checks
 * Each case prints "ok NAME" or "FAIL NAME: why"; the last line is PASSED or FAILED. The client also
 * checks what needs no server: a port nobody listens on (ECONNREFUSED), an address no node owns.
 * Then datagrams: the server echoes what arrives on PORT + 2 to whoever sent it, until "quit".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

static int failures;
#define CHECK(name, cond, ...)                                                                                                   \
	do {                                                                                                                     \
		if (cond) {                                                                                                      \
			printf("ok %s\n", name);                                                                                 \
		} else {                                                                                                         \
			printf("FAIL %s: ", name);                                                                               \
			printf(__VA_ARGS__);                                                                                     \
			printf(" (errno %s)\n", strerror(errno));                                                                \
			failures++;                                                                                              \
		}                                                                                                                \
		fflush(stdout);                                                                                                  \
	} while (0)

#define BIG (3 * 1024 * 1024 + 123) /* more than the socket's buffers, not a multiple of a message */

static struct sockaddr_in address_of(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 11));
}

/* Sends all of buf (blocking), or returns -1. */
static int send_all(int s, const uint8_t *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = rsend(s, buf + done, len - done, 0);
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static double seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * The server's half: accept, echo a big buffer back, then receive until end of file and answer with
 * the count, then a second connection that it closes right after sending.
 */
static int server(const char *ip, int port)
{
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = address_of(ip, port);
	if (l < 0 || rbind(l, (struct sockaddr *)&a, sizeof(a)) || rlisten(l, 4)) {
		printf("FAIL listen: %s\n", strerror(errno));
		return 1;
	}
	int d = rsocket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in da = address_of(ip, port + 2);
	CHECK("server-binds-a-datagram-socket", d >= 0 && rbind(d, (struct sockaddr *)&da, sizeof(da)) == 0, "rbind");
	printf("listening\n");
	fflush(stdout);
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	int s = raccept(l, (struct sockaddr *)&peer, &plen);
	CHECK("server-accepts", s >= 0 && plen == sizeof(peer) && peer.sin_family == AF_INET, "raccept %d", s);
	if (s < 0)
		return 1;
	/* echo: BIG bytes in, the same out */
	uint8_t *buf = malloc(BIG);
	ssize_t n = rrecv(s, buf, BIG, MSG_WAITALL);
	CHECK("server-waitall-gets-everything", n == BIG, "rrecv(MSG_WAITALL) gave %zd of %d", n, BIG);
	CHECK("server-echo-sent", send_all(s, buf, BIG) == 0, "rsend failed");
	/* count until end of file */
	size_t total = 0;
	while ((n = rrecv(s, buf, 65536, 0)) > 0)
		total += (size_t)n;
	CHECK("server-sees-end-of-file", n == 0, "rrecv gave %zd at the end", n);
	uint64_t count = total;
	CHECK("server-writes-after-peer-shut-write", send_all(s, (uint8_t *)&count, sizeof(count)) == 0, "rsend failed");
	rclose(s);
	/* second connection: send and close at once; what was sent must still arrive */
	s = raccept(l, NULL, NULL);
	for (size_t i = 0; i < 100000; i++)
		buf[i] = pattern(i);
	CHECK("server-second-accept", s >= 0 && send_all(s, buf, 100000) == 0, "raccept or rsend failed");
	rclose(s);
	rclose(l);
	/* datagrams: echo each to its sender (a 1000-byte answer to "big"), until "quit" */
	int echoed = 0;
	for (;;) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t m = rrecvfrom(d, buf, 65536, 0, (struct sockaddr *)&from, &flen);
		if (m < 0)
			break;
		if (m == 4 && !memcmp(buf, "quit", 4))
			break;
		if (m == 3 && !memcmp(buf, "big", 3)) {
			memset(buf, 'b', 1000);
			m = 1000;
		}
		if (rsendto(d, buf, (size_t)m, 0, (struct sockaddr *)&from, flen) == m)
			echoed++;
	}
	CHECK("server-echoed-datagrams-to-their-senders", echoed > 0, "echoed %d", echoed);
	rclose(d);
	free(buf);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures != 0;
}

/* Sends a datagram and waits for the answer (sent again up to 10 times: datagrams may be dropped). */
static ssize_t ask(int d, const void *msg, size_t len, void *answer, size_t room, const struct sockaddr_in *to, struct sockaddr_in *from,
		   int flags)
{
	for (int attempt = 0; attempt < 10; attempt++) {
		if (to ? rsendto(d, msg, len, 0, (const struct sockaddr *)to, sizeof(*to)) != (ssize_t)len : rsend(d, msg, len, 0) != (ssize_t)len)
			return -1;
		struct pollfd p = { .fd = d, .events = POLLIN };
		if (rpoll(&p, 1, 1000) == 1) {
			socklen_t flen = sizeof(*from);
			return from ? rrecvfrom(d, answer, room, flags, (struct sockaddr *)from, &flen) : rrecv(d, answer, room, flags);
		}
	}
	errno = ETIMEDOUT;
	return -1;
}

static void datagrams(const char *ip, int port)
{
	struct sockaddr_in server = address_of(ip, port + 2), from;
	int d = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK("datagram-socket", d >= 0, "rsocket(SOCK_DGRAM)");
	char answer[2000];
	ssize_t n = rsend(d, "x", 1, 0);
	CHECK("datagram-send-without-a-peer-needs-an-address", n == -1 && errno == EDESTADDRREQ, "rsend gave %zd", n);
	n = ask(d, "hello", 5, answer, sizeof(answer), &server, &from, 0);
	CHECK("sendto-and-recvfrom-name-the-server", n == 5 && !memcmp(answer, "hello", 5) && from.sin_port == server.sin_port
							 && from.sin_addr.s_addr == server.sin_addr.s_addr,
	      "answer %zd bytes from %s:%d", n, inet_ntoa(from.sin_addr), ntohs(from.sin_port));
	static char huge[70000];
	n = rsendto(d, huge, sizeof(huge), 0, (struct sockaddr *)&server, sizeof(server));
	CHECK("a-datagram-longer-than-the-mtu-is-emsgsize", n == -1 && errno == EMSGSIZE, "rsendto gave %zd", n);
	CHECK("connect-names-the-peer", rconnect(d, (struct sockaddr *)&server, sizeof(server)) == 0, "rconnect");
	n = ask(d, "big", 3, answer, 10, NULL, NULL, 0);
	CHECK("a-short-read-takes-the-start-and-drops-the-rest", n == 10 && answer[0] == 'b', "rrecv gave %zd", n);
	n = rrecv(d, answer, sizeof(answer), MSG_DONTWAIT);
	CHECK("nothing-of-a-datagram-remains", n == -1 && errno == EAGAIN, "rrecv gave %zd", n);
	n = ask(d, "again", 5, answer, sizeof(answer), NULL, NULL, 0);
	CHECK("send-and-recv-on-a-connected-datagram-socket", n == 5 && !memcmp(answer, "again", 5), "rrecv gave %zd", n);
	rsend(d, "quit", 4, 0);
	rclose(d);
}

static int client(const char *ip, int port)
{
	/* what needs no server */
	struct sockaddr_in nobody = address_of(ip, port + 1);
	int r = rsocket(AF_INET, SOCK_STREAM, 0);
	double t0 = seconds();
	int c = rconnect(r, (struct sockaddr *)&nobody, sizeof(nobody));
	CHECK("connect-to-a-port-nobody-listens-on-is-refused", c == -1 && errno == ECONNREFUSED && seconds() - t0 < 5,
	      "rconnect %d after %.1f s", c, seconds() - t0);
	rclose(r);
	struct sockaddr_in unowned = address_of("127.0.1.99", port);
	r = rsocket(AF_INET, SOCK_STREAM, 0);
	c = rconnect(r, (struct sockaddr *)&unowned, sizeof(unowned));
	CHECK("connect-to-an-address-no-node-owns-fails", c == -1 && (errno == EHOSTUNREACH || errno == ETIMEDOUT), "rconnect %d", c);
	rclose(r);
	r = rsocket(AF_INET, SOCK_STREAM, 0);
	int flags = rfcntl(r, F_GETFL);
	CHECK("fcntl-sets-nonblocking", rfcntl(r, F_SETFL, flags | O_NONBLOCK) == 0 && (rfcntl(r, F_GETFL) & O_NONBLOCK), "F_SETFL");
	c = rconnect(r, (struct sockaddr *)&nobody, sizeof(nobody));
	int async_in_progress = c == -1 && errno == EINPROGRESS;
	struct pollfd p = { .fd = r, .events = POLLOUT };
	int ready = rpoll(&p, 1, 5000);
	int err = 0;
	socklen_t elen = sizeof(err);
	rgetsockopt(r, SOL_SOCKET, SO_ERROR, &err, &elen);
	CHECK("nonblocking-connect-refused-shows-in-so-error", async_in_progress && ready == 1 && (p.revents & POLLERR) && err == ECONNREFUSED,
	      "rconnect %d, rpoll %d revents 0x%x, SO_ERROR %d", c, ready, p.revents, err);
	rclose(r);

	/* the server's cases */
	struct sockaddr_in a = address_of(ip, port);
	int s = -1;
	for (int attempt = 0; attempt < 50 && s < 0; attempt++) {
		s = rsocket(AF_INET, SOCK_STREAM, 0);
		if (rconnect(s, (struct sockaddr *)&a, sizeof(a))) {
			rclose(s);
			s = -1;
			usleep(100000);
		}
	}
	CHECK("connects", s >= 0, "no connection to %s:%d", ip, port);
	if (s < 0)
		goto out;
	struct sockaddr_in name;
	socklen_t nlen = sizeof(name);
	CHECK("getpeername-is-the-server", rgetpeername(s, (struct sockaddr *)&name, &nlen) == 0 && name.sin_port == a.sin_port
						   && name.sin_addr.s_addr == a.sin_addr.s_addr, "rgetpeername");
	nlen = sizeof(name);
	CHECK("getsockname-has-a-port", rgetsockname(s, (struct sockaddr *)&name, &nlen) == 0 && name.sin_family == AF_INET && name.sin_port,
	      "rgetsockname");
	uint8_t *out = malloc(BIG), *in = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		out[i] = pattern(i);
	/* a gathered send: three pieces */
	struct iovec v[3] = { { out, 1000 }, { out + 1000, 500000 }, { out + 501000, BIG - 501000 } };
	size_t sent = 0;
	while (sent < BIG) {
		ssize_t n = sent ? rsend(s, out + sent, BIG - sent, 0) : rwritev(s, v, 3);
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	CHECK("writev-and-send-take-everything", sent == BIG, "sent %zu of %d", sent, BIG);
	/* MSG_PEEK leaves the bytes for the next read */
	uint8_t peeked[100];
	ssize_t n = rrecv(s, peeked, sizeof(peeked), MSG_PEEK);
	size_t got = 0;
	while (got < BIG && (n = rrecv(s, in + got, BIG - got, 0)) > 0)
		got += (size_t)n;
	CHECK("peek-then-read-sees-the-same-bytes", !memcmp(peeked, out, sizeof(peeked)), "peeked bytes differ");
	CHECK("echo-comes-back-whole-and-in-order", got == BIG && !memcmp(in, out, BIG), "got %zu of %d bytes (first difference at %zd)", got,
	      BIG, got ? (ssize_t)(memcmp(in, out, got) ? 0 : -1) : -1);
	/* nonblocking: nothing to read is EAGAIN, not a wait */
	n = rrecv(s, in, 10, MSG_DONTWAIT);
	CHECK("dontwait-with-nothing-to-read-is-eagain", n == -1 && errno == EAGAIN, "rrecv gave %zd", n);
	/* shutdown(SHUT_WR): the server reads to end of file and still answers */
	CHECK("data-before-shutdown", send_all(s, out, 777777) == 0, "rsend failed");
	CHECK("shutdown-write", rshutdown(s, SHUT_WR) == 0, "rshutdown");
	n = rsend(s, out, 10, 0);
	CHECK("send-after-shutdown-is-epipe", n == -1 && errno == EPIPE, "rsend gave %zd", n);
	uint64_t count = 0;
	n = rrecv(s, &count, sizeof(count), MSG_WAITALL);
	CHECK("server-counted-everything-before-end-of-file", n == sizeof(count) && count == 777777, "rrecv %zd, count %lu", n,
	      (unsigned long)count);
	struct pollfd pr = { .fd = s, .events = POLLIN };
	CHECK("rpoll-sees-end-of-file-as-readable", rpoll(&pr, 1, 5000) == 1 && (pr.revents & (POLLIN | POLLHUP)), "revents 0x%x", pr.revents);
	n = rrecv(s, in, 10, 0);
	CHECK("end-of-file-after-the-server-closed", n == 0, "rrecv gave %zd", n);
	rclose(s);
	/* a server that sends and closes at once: every byte arrives, then end of file */
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK("second-connect", rconnect(s, (struct sockaddr *)&a, sizeof(a)) == 0, "rconnect");
	got = 0;
	int hung_up_early = 0;
	usleep(500000); /* the bytes and the close both arrive before the first look */
	for (;;) {
		/* as rstream -T a does: poll, and a hang-up with bytes still to read would end it early */
		struct pollfd pw = { .fd = s, .events = POLLIN };
		rpoll(&pw, 1, 5000);
		n = rrecv(s, in + got, BIG - got, MSG_DONTWAIT);
		if (n > 0 && (pw.revents & POLLHUP))
			hung_up_early = 1;
		if (n > 0)
			got += (size_t)n;
		else if (!(n == -1 && errno == EAGAIN))
			break;
	}
	int same = got == 100000;
	for (size_t i = 0; same && i < got; i++)
		same = in[i] == pattern(i);
	CHECK("bytes-sent-before-close-arrive", same && n == 0, "got %zu bytes, last rrecv %zd", got, n);
	CHECK("no-hang-up-while-bytes-are-left-to-read", !hung_up_early, "rpoll said POLLHUP before the last bytes were read");
	/* rselect on a closed-by-peer socket: readable */
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	struct timeval tv = { .tv_sec = 5 };
	CHECK("rselect-reports-readable", rselect(s + 1, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(s, &rd), "rselect");
	rclose(s);
	free(out);
	free(in);
	datagrams(ip, port);
out:
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures != 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server|client ADDRESS PORT\n", argv[0]);
		return 2;
	}
	int port = atoi(argv[3]);
	return strcmp(argv[1], "server") ? client(argv[2], port) : server(argv[2], port);
}
