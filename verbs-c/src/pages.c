/*
 * The page book: which of the program's pages the library maps from the node's memory (its extents) and
 * which live registrations cover, the node's holds on pages for the program's CPU and their release,
 * page runs kept off the heap, and private copies made in place. memory.c (registration) and pager.c
 * (the pages the node takes back) both keep their accounts here; neither calls the other for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pw.h"
#include "pages.h"
#include "settings.h"
#include "wire.h"

/* Whether a live (explicit) registration other than `except` covers `page`. */
int pw_covered_except(struct pw_context *ctx, uint64_t page, struct pw_mr *except)
{
	for (int i = 0; i < ctx->mrs.count; i++) {
		struct pw_mr *m = ctx->mrs.items[i];
		if (m != except && !m->implicit && page >= m->first && page < m->end)
			return 1;
	}
	return 0;
}

int pw_covered(struct pw_context *ctx, uint64_t page)
{
	return pw_covered_except(ctx, page, NULL);
}

int pw_extent_add(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	pthread_mutex_lock(&ctx->extent_lock);
	if (ctx->extent_count + 2 > ctx->extent_slots) {
		int slots = ctx->extent_slots ? ctx->extent_slots * 2 : 64;
		uint64_t *grown = realloc(ctx->extents, sizeof(*grown) * (size_t)slots);
		if (!grown) {
			pthread_mutex_unlock(&ctx->extent_lock);
			return ENOMEM;
		}
		ctx->extents = grown;
		ctx->extent_slots = slots;
	}
	ctx->extents[ctx->extent_count++] = first;
	ctx->extents[ctx->extent_count++] = end;
	pthread_mutex_unlock(&ctx->extent_lock);
	return 0;
}

void pw_extent_remove(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	pthread_mutex_lock(&ctx->extent_lock);
	for (int i = 0; i + 1 < ctx->extent_count; i += 2) {
		if (ctx->extents[i] == first && ctx->extents[i + 1] == end) {
			ctx->extents[i] = ctx->extents[ctx->extent_count - 2];
			ctx->extents[i + 1] = ctx->extents[ctx->extent_count - 1];
			ctx->extent_count -= 2;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->extent_lock);
}

int pw_extent_covers(struct pw_context *ctx, uint64_t page)
{
	int found = 0;
	pthread_mutex_lock(&ctx->extent_lock);
	for (int i = 0; i + 1 < ctx->extent_count && !found; i += 2)
		found = page >= ctx->extents[i] && page < ctx->extents[i + 1];
	pthread_mutex_unlock(&ctx->extent_lock);
	return found;
}

Pagewire__Verbs__V1__MapCpuPagesRequest pw_map_request(Pagewire__Verbs__V1__EndpointRef *ref, uint64_t first, uint64_t end)
{
	Pagewire__Verbs__V1__MapCpuPagesRequest req = PAGEWIRE__VERBS__V1__MAP_CPU_PAGES_REQUEST__INIT;
	req.endpoint = ref;
	req.address = first;
	req.length = end - first;
	return req;
}

int pw_hold(struct pw_context *ctx, struct pw_conn *conn, uint64_t first, uint64_t end, int release,
	    Pagewire__Verbs__V1__MapCpuPagesResponse **out)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__MapCpuPagesRequest req = pw_map_request(&ref, first, end);
	req.release = release;
	ProtobufCMessage *reply = NULL;
	int e = pw_call(conn, "MapCpuPages", &req.base, &pagewire__verbs__v1__map_cpu_pages_response__descriptor, &reply);
	if (!e && out)
		*out = (Pagewire__Verbs__V1__MapCpuPagesResponse *)reply;
	else if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	return e;
}

int pw_let_go(struct pw_context *ctx, struct pw_conn *conn, uint64_t first, uint64_t end, int discard)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__MapCpuPagesRequest req = pw_map_request(&ref, first, end);
	req.release = !discard;
	req.discard = discard;
	uint8_t buffer[2048];
	ProtobufCMessage *reply = NULL;
	return pw_call_in(conn, "MapCpuPages", &req.base, &pagewire__verbs__v1__map_cpu_pages_response__descriptor, buffer, sizeof(buffer),
			  &reply);
}

int pw_runs_add(struct pw_runs *runs, uint64_t first, uint64_t end)
{
	if (runs->count + 2 > runs->slots) {
		int slots = runs->slots ? runs->slots * 2 : 512;
		size_t was = sizeof(uint64_t) * (size_t)runs->slots, now = sizeof(uint64_t) * (size_t)slots;
		void *grown = runs->pairs ? mremap(runs->pairs, was, now, MREMAP_MAYMOVE)
					  : mmap(NULL, now, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (grown == MAP_FAILED)
			return ENOMEM;
		runs->pairs = grown;
		runs->slots = slots;
	}
	runs->pairs[runs->count++] = first;
	runs->pairs[runs->count++] = end;
	return 0;
}

void pw_runs_free(struct pw_runs *runs)
{
	if (runs->pairs)
		munmap(runs->pairs, sizeof(uint64_t) * (size_t)runs->slots);
	runs->pairs = NULL;
	runs->count = runs->slots = 0;
}

int pw_hold_one(struct pw_context *ctx, uint64_t page, uint32_t *frame)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__MapCpuPagesRequest req = pw_map_request(&ref, page, page + ctx->page_size);
	uint8_t buffer[4096];
	ProtobufCMessage *reply = NULL;
	int e = pw_call_in(&ctx->pager_conn, "MapCpuPages", &req.base, &pagewire__verbs__v1__map_cpu_pages_response__descriptor, buffer,
			   sizeof(buffer), &reply);
	if (e)
		return e;
	Pagewire__Verbs__V1__MapCpuPagesResponse *held = (Pagewire__Verbs__V1__MapCpuPagesResponse *)reply;
	if (held->n_frames != 1)
		return EPROTO;
	*frame = held->frames[0];
	return 0;
}

/*
 * Copies whole pages without the checks an AddressSanitizer build puts on every access and libc call:
 * the program's allocator may keep poisoned red zones around its buffers in them.
 */
__attribute__((no_sanitize("address"))) static void copy_pages(void *to, uint64_t from, size_t n)
{
	const volatile uint64_t *src = (const volatile uint64_t *)(uintptr_t)from; /* volatile: no memcpy call in its place */
	uint64_t *dst = to;
	for (size_t i = 0; i < n / sizeof(uint64_t); i++)
		dst[i] = src[i];
}

int pw_private_copy(uint64_t first, uint64_t end)
{
	size_t n = (size_t)(end - first);
	void *copy = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy == MAP_FAILED)
		return errno;
	copy_pages(copy, first, n);
	/*
	 * The system call itself, not libc's mremap: a program may hook mremap to watch its mappings, and
	 * UCX 1.13's hook takes four arguments, so the new address arrives as NULL (EPERM). The pages keep
	 * their addresses and bytes, so no watcher needs to hear of this.
	 */
	if (syscall(SYS_mremap, copy, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)first) == -1) {
		int e = errno;
		munmap(copy, n);
		return e;
	}
	return 0;
}
