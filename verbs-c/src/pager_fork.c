/*
 * fork(): the frames are MAP_SHARED, which fork would share with the child instead of copying; so the
 * parent holds every context's faults until the child has private copies of all registered pages (read
 * from the node where the node had taken them back), as it would of ordinary memory. The library's
 * threads do not exist in the child; its registrations there are plain memory.
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>

#include "pages.h"
#include "pager_state.h"
#include "settings.h"
#include "wire.h"

/* ---- fork: the child gets its own copies of registered pages ---------------------------------------- */

/*
 * Copies of a page the node had taken back when the process forked: read from the node (a Load on the
 * parent's endpoint, which brings it in) into a private page at its address. In the child, where only
 * async-signal-safe work is allowed: a fresh connection, a static buffer, no heap, no locks.
 */
static uint8_t fork_buffer[256 << 10];

static void copy_from_node(struct pw_context *ctx, struct pw_conn *conn, uint64_t first, uint64_t end)
{
	uint64_t ps = ctx->page_size;
	for (uint64_t page = first; page < end; page += ps) {
		void *p = mmap((void *)(uintptr_t)page, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == MAP_FAILED || conn->fd < 0 || ps > sizeof(fork_buffer) / 4)
			continue; /* the child reads zeros there */
		Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
		Pagewire__Verbs__V1__LoadRequest req = PAGEWIRE__VERBS__V1__LOAD_REQUEST__INIT;
		req.endpoint = &ref;
		req.address = page;
		req.length = (uint32_t)ps;
		ProtobufCMessage *reply = NULL;
		if (pw_call_in(conn, "Load", &req.base, &pagewire__verbs__v1__load_response__descriptor, fork_buffer, sizeof(fork_buffer),
			       &reply)
		    == 0) {
			Pagewire__Verbs__V1__LoadResponse *loaded = (Pagewire__Verbs__V1__LoadResponse *)reply;
			memcpy(p, loaded->data.data, loaded->data.len < ps ? loaded->data.len : ps);
		}
	}
}

/* The parent: nothing is taken away or brought back until the child has its copies. */
static void before_fork(void)
{
	pthread_mutex_lock(&pager.lock);
	for (int i = 0; i < MAX_CONTEXTS; i++)
		if (pager.contexts[i])
			pthread_mutex_lock(&pager.contexts[i]->fault_lock);
	if (pipe2(pager.fork_done, O_CLOEXEC) != 0)
		pager.fork_done[0] = pager.fork_done[1] = -1;
}

static void after_fork_parent(void)
{
	if (pager.fork_done[0] >= 0) {
		close(pager.fork_done[1]);
		char done;
		/* the child closes its end when its copies are made (or when it ends) */
		struct pollfd p = {.fd = pager.fork_done[0], .events = POLLIN};
		poll(&p, 1, 60 * 1000);
		if (read(pager.fork_done[0], &done, 1) < 0) {
			/* the child ended or said so: either way the copies are taken */
		}
		close(pager.fork_done[0]);
	}
	for (int i = 0; i < MAX_CONTEXTS; i++)
		if (pager.contexts[i])
			pthread_mutex_unlock(&pager.contexts[i]->fault_lock);
	pthread_mutex_unlock(&pager.lock);
}

static void after_fork_child(void)
{
	/* Only this thread exists: the library's locks are taken by it (before_fork) and its pager is gone. */
	for (int i = 0; i < MAX_CONTEXTS; i++) {
		struct pw_context *ctx = pager.contexts[i];
		if (!ctx)
			continue;
		struct pw_conn conn = {.fd = -1};
		if (ctx->away.count > 0 && pw_conn_open(&conn, ctx->dev->socket_path) != 0)
			conn.fd = -1;
		for (int j = 0; j + 1 < ctx->extent_count; j += 2) {
			/* present pages: a private copy of each run between the pages taken away */
			uint64_t first = ctx->extents[j], end = ctx->extents[j + 1], ps = ctx->page_size;
			for (uint64_t p = first; p < end;) {
				int away = 0;
				for (int k = 0; k + 1 < ctx->away.count && !away; k += 2)
					away = p >= ctx->away.pairs[k] && p < ctx->away.pairs[k + 1];
				uint64_t q = p + ps;
				if (away) {
					copy_from_node(ctx, &conn, p, q);
				} else {
					while (q < end) {
						int next_away = 0;
						for (int k = 0; k + 1 < ctx->away.count && !next_away; k += 2)
							next_away = q >= ctx->away.pairs[k] && q < ctx->away.pairs[k + 1];
						if (next_away)
							break;
						q += ps;
					}
					pw_private_copy(p, q);
				}
				p = q;
			}
		}
		if (conn.fd >= 0)
			close(conn.fd);
		ctx->extent_count = 0;
		ctx->away.count = 0;
		pager.contexts[i] = NULL;
		pthread_mutex_unlock(&ctx->fault_lock);
	}
	if (pager.fork_done[1] >= 0)
		close(pager.fork_done[1]);
	if (pager.fork_done[0] >= 0)
		close(pager.fork_done[0]);
	pager.started = 0;
	if (pager.uffd >= 0)
		close(pager.uffd);
	pager.uffd = -1;
	if (pager.wake_fd >= 0)
		close(pager.wake_fd);
	pager.wake_fd = -1;
	pthread_mutex_unlock(&pager.lock);
}

void pw_pager_register_fork(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
