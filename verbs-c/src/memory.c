/*
 * Registered memory is the node's memory: the pages of a registered buffer become node frames, mapped
 * (MAP_SHARED|MAP_FIXED) from the node's memory file at the program's own addresses, so the program's
 * loads and stores and the NIC's DMA meet in the same bytes with no copy on post or poll. What the
 * buffer held before is written into its frames first. The node reserves the same addresses in the
 * session's endpoint and holds each mapped page (a CPU mapping keeps its frame, counted as a pin). When
 * no registration covers a page any more, its bytes go back into the program's own anonymous memory
 * and the node frees the page.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pw.h"
#include "pages.h"
#include "memory.h"
#include "pager.h"
#include "settings.h"
#include "wire.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define PW_MEMCHECK_QUIET_BEGIN VALGRIND_DISABLE_ERROR_REPORTING
#define PW_MEMCHECK_QUIET_END VALGRIND_ENABLE_ERROR_REPORTING
#endif
#endif
#ifndef PW_MEMCHECK_QUIET_BEGIN
#define PW_MEMCHECK_QUIET_BEGIN ((void)0)
#define PW_MEMCHECK_QUIET_END ((void)0)
#endif

int pw_memory_attach(struct pw_context *ctx, const char *memory_path)
{
	ctx->memory_fd = open(memory_path, O_RDWR | O_CLOEXEC);
	if (ctx->memory_fd < 0) {
		pw_log(PW_ERROR, "cannot open the node's memory file %s: %s", memory_path, strerror(errno));
		return errno;
	}
	uint8_t header[PW_MEMORY_FIELDS];
	uint64_t magic = 0;
	if (pread(ctx->memory_fd, header, sizeof(header), 0) == (ssize_t)sizeof(header))
		memcpy(&magic, header, sizeof(magic));
	if (magic != PW_MEMORY_MAGIC) {
		pw_log(PW_ERROR, "%s is not a Pagewire memory file", memory_path);
		close(ctx->memory_fd);
		ctx->memory_fd = -1;
		return EPROTO;
	}
	uint32_t page_size;
	memcpy(&page_size, header + PW_MEMORY_PAGE_SIZE, sizeof(page_size));
	memcpy(&ctx->frames_offset, header + PW_MEMORY_FRAMES, sizeof(ctx->frames_offset));
	long cpu_page = sysconf(_SC_PAGESIZE);
	if (page_size != ctx->page_size || page_size % (uint32_t)cpu_page != 0) {
		pw_log(PW_ERROR, "the node's page size %u is not a multiple of this machine's (%ld): its frames cannot be mapped",
		       page_size, cpu_page);
		close(ctx->memory_fd);
		ctx->memory_fd = -1;
		return EOPNOTSUPP;
	}
	return 0;
}

static int reserve(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__AllocateRequest req = PAGEWIRE__VERBS__V1__ALLOCATE_REQUEST__INIT;
	req.endpoint = &ref;
	req.address = first;
	req.length = end - first;
	return pw_call_void(&ctx->control, "Allocate", &req.base, &pagewire__verbs__v1__allocate_response__descriptor);
}

static int free_pages(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__FreeRequest req = PAGEWIRE__VERBS__V1__FREE_REQUEST__INIT;
	req.endpoint = &ref;
	req.address = first;
	req.length = end - first;
	return pw_call_void(&ctx->control, "Free", &req.base, &pagewire__verbs__v1__free_response__descriptor);
}

/*
 * Whole pages move between the program's memory and the node's frames, whatever the program's
 * allocator keeps around its buffers there (a sanitizer's poisoned red zones among them): this one and
 * pages.c's copy copy pages without the checks an AddressSanitizer build puts on every access and libc call.
 */
static int pwrite_page(int fd, uint64_t from, size_t n, off_t at)
{
	errno = 0;
	/* Under valgrind, the page's bytes the program never wrote go along as they are, and memcheck is told not to call that a bug. */
	PW_MEMCHECK_QUIET_BEGIN;
	long written = syscall(SYS_pwrite64, fd, (const void *)(uintptr_t)from, n, at);
	PW_MEMCHECK_QUIET_END;
	return written == (long)n ? 0 : (errno ? errno : EIO);
}

/*
 * Makes [first, end) (page-aligned, none of it mapped yet) node frames at the same addresses: the node
 * reserves and holds the pages, the program's bytes are written into their frames, then the frames
 * replace the program's pages.
 */
static int map_run(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	/*
	 * Nothing from the heap while the node's requests for these pages wait (map_range's shield): the
	 * heap's own pages may be registered, and a fault in malloc then waits for frames that only
	 * come back once these pages are mapped. The answer is read into memory of its own.
	 */
	uint64_t ps = ctx->page_size;
	size_t pages = (size_t)((end - first) / ps);
	size_t bytes = 2 * (pages * 6 + 4096) + pages * 4 + 4096;
	uint8_t *buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buffer == MAP_FAILED)
		return ENOMEM;
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__MapCpuPagesRequest req = pw_map_request(&ref, first, end);
	ProtobufCMessage *reply = NULL;
	int e = pw_call_in(&ctx->control, "MapCpuPages", &req.base, &pagewire__verbs__v1__map_cpu_pages_response__descriptor, buffer, bytes,
			   &reply);
	for (int attempt = 0; e == ENOMEM && attempt < 1000; attempt++) {
		/* every frame is mapped by some program: reclaim has asked them for pages back, which takes a moment */
		struct timespec wait = {0, 2 * 1000 * 1000};
		nanosleep(&wait, NULL);
		e = pw_call_in(&ctx->control, "MapCpuPages", &req.base, &pagewire__verbs__v1__map_cpu_pages_response__descriptor, buffer,
			       bytes, &reply);
	}
	Pagewire__Verbs__V1__MapCpuPagesResponse *held = (Pagewire__Verbs__V1__MapCpuPagesResponse *)reply;
	if (!e && held->n_frames != pages) {
		pw_let_go(ctx, &ctx->control, first, end, 0);
		e = EPROTO;
	}
	/* The program's other threads may be storing into these pages (heap neighbours): held back until the frames replace them. */
	int frozen = !e && pw_freeze(ctx, first, end) == 0;
	for (size_t i = 0; !e && i < pages; i++) {
		off_t at = (off_t)(ctx->frames_offset + (uint64_t)held->frames[i] * ps);
		e = pwrite_page(ctx->memory_fd, first + i * ps, ps, at);
		if (e) {
			pw_log(PW_ERROR, "cannot register 0x%lx: the program's page there is not readable (%s)",
			       (unsigned long)(first + i * ps), strerror(e));
			pw_let_go(ctx, &ctx->control, first, end, 0);
		}
	}
	/* Consecutive frames map in one go. */
	for (size_t i = 0; !e && i < pages;) {
		size_t j = i + 1;
		while (j < pages && held->frames[j] == held->frames[j - 1] + 1)
			j++;
		off_t at = (off_t)(ctx->frames_offset + (uint64_t)held->frames[i] * ps);
		void *want = (void *)(uintptr_t)(first + i * ps);
		if (mmap(want, (j - i) * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ctx->memory_fd, at) == MAP_FAILED) {
			e = errno;
			if (e == ENOMEM)
				pw_log(PW_ERROR,
				       "cannot map the node's frames at 0x%lx: the process holds as many mappings as the kernel allows "
				       "(vm.max_map_count): a registered page is mapped from its frame, and pages whose frames are not "
				       "neighbours take a mapping each; raise vm.max_map_count or register less",
				       (unsigned long)(uintptr_t)want);
			else
				pw_log(PW_ERROR, "cannot map the node's frames at 0x%lx: %s", (unsigned long)(uintptr_t)want, strerror(e));
		}
		i = j;
	}
	if (frozen)
		pw_thaw(ctx, first, end, !e);
	munmap(buffer, bytes);
	return e;
}

/* Reads a byte of each page: pages the node took come back (the pager serves the fault). */
__attribute__((no_sanitize("address"))) static void touch_pages(uint64_t first, uint64_t end, uint64_t ps)
{
	for (uint64_t p = first; p < end; p += ps)
		(void)*(const volatile uint8_t *)(uintptr_t)p;
}

/* Whether the program still maps [first, end) (it may have unmapped a buffer it had registered). */
static int still_mapped(uint64_t first, uint64_t end)
{
	unsigned char v[64];
	for (uint64_t p = first; p < end;) {
		size_t pages = (size_t)((end - p) / 4096);
		if (pages > sizeof(v))
			pages = sizeof(v);
		if (mincore((void *)(uintptr_t)p, pages * 4096, v) != 0)
			return 0;
		p += pages * 4096;
	}
	return 1;
}

/*
 * Gives [first, end) back to the program: its bytes into fresh anonymous pages, which then replace the
 * node's frames at the same addresses in one mremap, so the range is never unmapped or zero in
 * between; then the node frees the pages. Nothing here comes from the heap: the range may hold the
 * heap's own pages (a malloc'd buffer's neighbours), and a copy taken from the heap could lie in the
 * very page being replaced. The program's stores meanwhile are held back (pw_freeze), after pages the
 * node had taken are brought in (they cannot be taken again: the range is shielded). Pages the program
 * unmapped itself stay unmapped.
 */
static void give_back(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	size_t n = (size_t)(end - first);
	if (!still_mapped(first, end)) {
		pw_log(PW_INFO, "0x%lx+%zu was unmapped while registered; its frames are freed", (unsigned long)first, n);
		return;
	}
	touch_pages(first, end, ctx->page_size);
	int frozen = pw_freeze(ctx, first, end) == 0;
	int e = pw_private_copy(first, end);
	if (frozen)
		pw_thaw(ctx, first, end, !e);
	if (e)
		pw_log(PW_ERROR, "cannot give 0x%lx+%zu back to the program: %s; it stays mapped from the node", (unsigned long)first, n,
		       strerror(e));
}

static void unmap_run(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	give_back(ctx, first, end);
	pw_hold(ctx, &ctx->control, first, end, 1, NULL);
	free_pages(ctx, first, end);
}

/* Pages [first, end) are being given back to the program: the node's unmap requests for them wait. */
static void shield(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	pthread_mutex_lock(&ctx->fault_lock);
	ctx->shield_first = first;
	ctx->shield_end = end;
	pthread_mutex_unlock(&ctx->fault_lock);
}

/* The pages are given back: serve the unmap requests that waited. */
static void unshield(struct pw_context *ctx)
{
	pthread_mutex_lock(&ctx->fault_lock);
	ctx->shield_first = ctx->shield_end = 0;
	for (int i = 0; i + 1 < ctx->deferred.count; i += 2)
		pw_unmap_for_node(ctx, ctx->deferred.pairs[i], ctx->deferred.pairs[i + 1]);
	ctx->deferred.count = 0;
	pthread_mutex_unlock(&ctx->fault_lock);
}

/*
 * Maps every page of [first, end) no registration maps yet. Called with mr_lock held. The node may
 * want some of these pages back before they are even mapped (reclaim picks frames the CPU holds): its
 * requests wait (shield) until they are, or the program's bytes could not be copied into their frames.
 */
static int map_range(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	uint64_t ps = ctx->page_size;
	int e = reserve(ctx, first, end);
	if (e)
		return e;
	shield(ctx, first, end);
	for (uint64_t p = first; p < end && !e;) {
		if (pw_covered(ctx, p)) {
			p += ps;
			continue;
		}
		uint64_t q = p + ps;
		while (q < end && !pw_covered(ctx, q))
			q += ps;
		e = map_run(ctx, p, q);
		p = q;
	}
	unshield(ctx);
	return e;
}

static int add_mr(struct pw_context *ctx, struct pw_mr *m)
{
	return pw_table_add(&ctx->mrs, m, 16);
}

static void remove_mr(struct pw_context *ctx, struct pw_mr *m)
{
	pw_table_remove(&ctx->mrs, m);
}

Pagewire__Verbs__V1__Access *pw_access_list(unsigned int access, size_t *n, Pagewire__Verbs__V1__Access out[5])
{
	*n = 0;
	if (access & IBV_ACCESS_LOCAL_WRITE)
		out[(*n)++] = PAGEWIRE__VERBS__V1__ACCESS__LOCAL_WRITE;
	if (access & IBV_ACCESS_REMOTE_WRITE)
		out[(*n)++] = PAGEWIRE__VERBS__V1__ACCESS__REMOTE_WRITE;
	if (access & IBV_ACCESS_REMOTE_READ)
		out[(*n)++] = PAGEWIRE__VERBS__V1__ACCESS__REMOTE_READ;
	if (access & IBV_ACCESS_REMOTE_ATOMIC)
		out[(*n)++] = PAGEWIRE__VERBS__V1__ACCESS__REMOTE_ATOMIC;
	if (access & IBV_ACCESS_MW_BIND)
		out[(*n)++] = PAGEWIRE__VERBS__V1__ACCESS__MW_BIND;
	return out;
}

static void forget_mr(struct pw_context *ctx, struct pw_mr *m);

/*
 * A PINNED registration at least this large first asks the node whether its pins would fit: mapping a range
 * costs time in proportion to its pages, and a refusal after mapping would pay it twice for nothing.
 */
#define PW_PIN_CHECK_BYTES (4u << 20)

static int check_pin_range(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__RegisterRegionRequest req = PAGEWIRE__VERBS__V1__REGISTER_REGION_REQUEST__INIT;
	req.endpoint = &ref;
	req.address = first;
	req.length = end - first;
	req.mode = PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PINNED;
	req.check_only = 1;
	return pw_call_void(&ctx->control, "RegisterRegion", &req.base, &pagewire__verbs__v1__register_region_response__descriptor);
}

struct ibv_mr *pw_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct pw_context *ctx = pw_ctx(pd->context);
	int implicit = addr == NULL && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND);
	if (!implicit && (length == 0 || (uintptr_t)addr + length < (uintptr_t)addr)) {
		errno = EINVAL;
		return NULL;
	}
	if (!implicit && iova != (uintptr_t)addr) {
		pw_log(PW_WARN, "ibv_reg_mr_iova: an iova other than the buffer's address is not supported");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (access
	    & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND
		| IBV_ACCESS_ON_DEMAND | IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE)) {
		pw_log(PW_WARN, "ibv_reg_mr: access flags 0x%x include some Pagewire does not support (zero-based, HUGETLB)", access);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL; /* as the verbs API requires */
		return NULL;
	}
	struct pw_mr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	uint64_t ps = ctx->page_size;
	m->implicit = implicit;
	m->first = implicit ? 0 : ((uintptr_t)addr & ~(ps - 1));
	m->end = implicit ? 0 : (((uintptr_t)addr + length + ps - 1) & ~(ps - 1));
	static int warned;
	if (!implicit && !__atomic_load_n(&warned, __ATOMIC_RELAXED) && pw_other_context_maps(ctx, m->first, m->end)
	    && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		pw_log(PW_WARN,
		       "ibv_reg_mr: %p+%zu shares pages with a registration of another context (the device opened twice, or "
		       "another node): a page is mapped from one context's node at a time, so the other's NIC no longer sees the "
		       "program's writes to the pages they share (said once per process; see docs/verbs.md)",
		       addr, length);
	Pagewire__Verbs__V1__RegistrationMode mode =
		(access & IBV_ACCESS_ON_DEMAND) ? PAGEWIRE__VERBS__V1__REGISTRATION_MODE__ON_DEMAND : pw_plain_mode();
	if (!implicit && mode == PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PINNED && m->end - m->first >= PW_PIN_CHECK_BYTES) {
		int refused = check_pin_range(ctx, m->first, m->end);
		if (refused) {
			free(m);
			errno = refused;
			return NULL;
		}
	}
	pthread_mutex_lock(&ctx->mr_lock);
	int e = implicit ? 0 : pw_extent_add(ctx, m->first, m->end);
	if (!e && !implicit) {
		e = map_range(ctx, m->first, m->end);
		if (e)
			pw_extent_remove(ctx, m->first, m->end);
	}
	if (!e)
		e = add_mr(ctx, m);
	if (e) {
		pthread_mutex_unlock(&ctx->mr_lock);
		free(m);
		errno = e;
		return NULL;
	}
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__RegisterRegionRequest req = PAGEWIRE__VERBS__V1__REGISTER_REGION_REQUEST__INIT;
	Pagewire__Verbs__V1__Access list[5];
	req.endpoint = &ref;
	req.address = (uintptr_t)addr;
	req.length = length;
	req.implicit = implicit;
	req.mode = mode;
	req.access = pw_access_list(access, &req.n_access, list);
	req.protection_domain = pd->handle;
	Pagewire__Verbs__V1__RegisterRegionResponse *reply = NULL;
	e = pw_call(&ctx->control, "RegisterRegion", &req.base, &pagewire__verbs__v1__register_region_response__descriptor,
		    (ProtobufCMessage **)&reply);
	if (e) {
		forget_mr(ctx, m); /* the pages it mapped go back to the program */
		pthread_mutex_unlock(&ctx->mr_lock);
		free(m);
		errno = e;
		return NULL;
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = reply->lkey;
	m->mr.lkey = reply->lkey;
	m->mr.rkey = (uint32_t)reply->rkey;
	m->mr_type = PW_MR_TYPE_MR;
	m->access = (int)access;
	if (reply->rkey >> 32)
		pw_log(PW_ERROR, "the node gave rkey 0x%lx, wider than verbs' 32 bits", (unsigned long)reply->rkey);
	protobuf_c_message_free_unpacked(&reply->base, NULL);
	if (implicit)
		__atomic_add_fetch(&ctx->implicit_registrations, 1, __ATOMIC_RELEASE);
	pw_pd_use(pd, 1);
	pw_log(PW_DEBUG, "registered %p+%zu as lkey %u rkey 0x%x", addr, length, m->mr.lkey, m->mr.rkey);
	return &m->mr;
}

int pw_dereg_mr(struct ibv_mr *mr)
{
	struct pw_mr *m = (struct pw_mr *)mr;
	struct pw_context *ctx = pw_ctx(mr->context);
	Pagewire__Verbs__V1__EndpointRef ref = pw_endpoint(ctx);
	Pagewire__Verbs__V1__DeregisterRegionRequest req = PAGEWIRE__VERBS__V1__DEREGISTER_REGION_REQUEST__INIT;
	req.endpoint = &ref;
	req.lkey = mr->lkey;
	int e = pw_call_void(&ctx->control, "DeregisterRegion", &req.base, &pagewire__verbs__v1__deregister_region_response__descriptor);
	if (e)
		return e;
	if (m->implicit)
		__atomic_sub_fetch(&ctx->implicit_registrations, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&ctx->mr_lock);
	forget_mr(ctx, m);
	pthread_mutex_unlock(&ctx->mr_lock);
	pw_pd_use(mr->pd, -1);
	free(m);
	return 0;
}

int pw_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct pw_mr *m = (struct pw_mr *)mr;
	struct pw_context *ctx = pw_ctx(mr->context);
	if (m->mr_type != PW_MR_TYPE_MR || m->implicit || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) || !flags
	    || ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) || (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
	    || ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct ibv_pd *new_pd = flags & IBV_REREG_MR_CHANGE_PD ? pd : mr->pd;
	void *new_addr = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? addr : mr->addr;
	size_t new_length = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? length : mr->length;
	int new_access = flags & IBV_REREG_MR_CHANGE_ACCESS ? access : m->access;
	/* The new registration first (its pages mapped while the old ones still are), then the old one goes. */
	struct ibv_mr *fresh = pw_reg_mr(new_pd, new_addr, new_length, (uintptr_t)new_addr, (unsigned int)new_access);
	if (!fresh)
		return IBV_REREG_MR_ERR_CMD;
	struct pw_mr *n = (struct pw_mr *)fresh;
	struct pw_mr *old = malloc(sizeof(*old));
	if (!old) {
		pw_dereg_mr(fresh);
		errno = ENOMEM;
		return IBV_REREG_MR_ERR_CMD;
	}
	pthread_mutex_lock(&ctx->mr_lock);
	*old = *m;
	*m = *n; /* the program's struct now describes the new registration (its keys may be new, as the standard allows) */
	pw_table_replace(&ctx->mrs, m, old);
	pw_table_replace(&ctx->mrs, n, m);
	pthread_mutex_unlock(&ctx->mr_lock);
	free(n);
	/* Dropping the old one invalidates the node's translations for it, as reclaim does. */
	if (pw_dereg_mr(&old->mr) != 0)
		pw_log(PW_WARN, "ibv_rereg_mr: the old registration (lkey %u) could not be dropped", old->mr.lkey);
	return 0;
}

/* Gives the pages only `m` maps back to the program and drops `m`. mr_lock held. */
/* Pages given back per run when none of them was taken by the node, and the most taken pages a run may hold. */
#define PW_GIVE_BACK_RUN 4096
#define PW_GIVE_BACK_AWAY 16

static void forget_mr(struct pw_context *ctx, struct pw_mr *m)
{
	shield(ctx, m->first, m->end);
	uint64_t ps = ctx->page_size;
	for (uint64_t p = m->first; p < m->end;) {
		if (pw_covered_except(ctx, p, m)) {
			p += ps;
			continue;
		}
		/*
		 * A run at a time, each given back and freed before the next: a page the kernel took faults back in
		 * while it is copied (m still covers it), and the frames freed are what lets it. A run may hold at most
		 * PW_GIVE_BACK_AWAY such pages, so that a node short of frames can serve them; resident pages need none,
		 * and long runs keep a large registration's release to a few calls.
		 */
		uint64_t q = p + ps;
		while (q < m->end && q - p < PW_GIVE_BACK_RUN * ps && !pw_covered_except(ctx, q, m))
			q += ps;
		if (q - p > PW_GIVE_BACK_AWAY * ps && pw_away_pages(ctx, p, q) > PW_GIVE_BACK_AWAY)
			q = p + PW_GIVE_BACK_AWAY * ps;
		unmap_run(ctx, p, q);
		p = q;
	}
	remove_mr(ctx, m);
	pw_extent_remove(ctx, m->first, m->end);
	unshield(ctx);
}

/*
 * Under an implicit (whole address space) registration a buffer is mapped when it is first posted: the
 * NIC may touch any page of the program, so the pages a work request names become frames then, and stay
 * (as covered by an internal registration of the library's own) until the context closes.
 */
int pw_memory_ensure(struct pw_context *ctx, uint32_t lkey, uint64_t addr, uint64_t length)
{
	/* the posting path: nothing to do, without a lock, unless the program has an implicit registration */
	if (length == 0 || __atomic_load_n(&ctx->implicit_registrations, __ATOMIC_ACQUIRE) == 0)
		return 0;
	uint64_t ps = ctx->page_size;
	uint64_t first = addr & ~(ps - 1);
	uint64_t end = (addr + length + ps - 1) & ~(ps - 1);
	pthread_mutex_lock(&ctx->mr_lock);
	int under_implicit = 0;
	for (int i = 0; i < ctx->mrs.count && !under_implicit; i++) {
		struct pw_mr *m = ctx->mrs.items[i];
		under_implicit = m->implicit && m->mr.lkey == lkey;
	}
	if (!under_implicit) {
		pthread_mutex_unlock(&ctx->mr_lock);
		return 0;
	}
	int all = 1;
	for (uint64_t p = first; p < end && all; p += ps)
		all = pw_covered(ctx, p);
	int e = 0;
	if (!all) {
		struct pw_mr *m = calloc(1, sizeof(*m));
		e = m ? pw_extent_add(ctx, first, end) : ENOMEM;
		if (!e) {
			e = map_range(ctx, first, end);
			if (e)
				pw_extent_remove(ctx, first, end);
		}
		if (!e) {
			m->first = first;
			m->end = end;
			e = add_mr(ctx, m);
		}
		if (e)
			free(m);
	}
	pthread_mutex_unlock(&ctx->mr_lock);
	return e;
}

/* The context closes: every registered page goes back to the program (the node frees the rest with the session). */
void pw_memory_close(struct pw_context *ctx)
{
	pthread_mutex_lock(&ctx->mr_lock);
	shield(ctx, 0, UINT64_MAX);
	while (ctx->mrs.count > 0) {
		struct pw_mr *m = ctx->mrs.items[ctx->mrs.count - 1];
		uint64_t ps = ctx->page_size;
		for (uint64_t p = m->first; p < m->end; p += ps) {
			if (!pw_covered_except(ctx, p, m)) {
				give_back(ctx, p, p + ps);
				pw_hold(ctx, &ctx->control, p, p + ps, 1,
					NULL); /* its frame may go now: the next page given back may need one */
			}
		}
		ctx->mrs.count--;
		pw_extent_remove(ctx, m->first, m->end);
		free(m); /* the program's ibv_mr is gone with the context */
	}
	unshield(ctx);
	pthread_mutex_unlock(&ctx->mr_lock);
	pw_runs_free(&ctx->deferred);
	free(ctx->extents);
	ctx->extents = NULL;
	if (ctx->memory_fd >= 0)
		close(ctx->memory_fd);
	ctx->memory_fd = -1;
}
