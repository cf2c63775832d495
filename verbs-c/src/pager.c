/*
 * Paging: the node's kernel takes pages of registered memory back (a CPU_UNMAP record), the library
 * unmaps them from the program, and the program's next touch brings them in again, served by one pager
 * thread per process that never allocates from the heap nor takes a lock the program may hold.
 *
 * Where the kernel allows it (userfaultfd, user-mode faults only: any user since Linux 5.11, with minor
 * faults on shared memory since 5.14), a page taken away keeps its mapping of the node's memory file,
 * registered for minor faults, and loses its page table entry; a touch blocks in the kernel and the
 * pager maps the page's new frame in its place, then wakes the toucher. No signal is involved. Elsewhere (a container whose seccomp profile forbids userfaultfd) the page is
 * made inaccessible, and the SIGSEGV handler only hands the address to the pager (an eventfd write)
 * and waits on a futex for its answer: nothing in it allocates, locks or talks to the node. A handler
 * the program installs later is kept behind the library's (sigaction and signal are interposed) and gets
 * every fault that is not the library's. PAGEWIRE_VERBS_PAGER=userfaultfd|signal chooses.
 *
 * pager_signal.c holds the signal path's handler, pager_fork.c what fork does; pager_state.h their shared state.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pw.h"
#include "pages.h"
#include "pager_state.h"
#include "pager.h"
#include "settings.h"
#include "wire.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13) /* Linux 6.4; newer than the headers Debian 12 ships */
#endif

struct pager_state pager = {.lock = PTHREAD_MUTEX_INITIALIZER, .uffd = -1, .wake_fd = -1, .fork_done = {-1, -1}};

/* ---- which context maps a page ---------------------------------------------------------------------- */

/* The context whose registrations cover `address`, or NULL. Takes the library's own locks only. */
static struct pw_context *owner_of(uint64_t address)
{
	struct pw_context *found = NULL;
	pthread_mutex_lock(&pager.lock);
	for (int i = 0; i < MAX_CONTEXTS && !found; i++) {
		struct pw_context *ctx = pager.contexts[i];
		if (ctx && pw_extent_covers(ctx, address & ~((uint64_t)ctx->page_size - 1)))
			found = ctx;
	}
	pthread_mutex_unlock(&pager.lock);
	return found;
}

/* Whether a context other than `ctx` maps a page of [first, end) from its node's memory. */
int pw_other_context_maps(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	int found = 0;
	pthread_mutex_lock(&pager.lock);
	for (int i = 0; i < MAX_CONTEXTS && !found; i++) {
		struct pw_context *other = pager.contexts[i];
		for (uint64_t p = first; other && other != ctx && p < end && !found; p += ctx->page_size)
			found = pw_extent_covers(other, p);
	}
	pthread_mutex_unlock(&pager.lock);
	return found;
}

/* ---- pages taken away: page-aligned runs per context (what fork copies from the node) ---------------- */

/* Page `page` is back: split or drop the run that held it. fault_lock held. */
static void away_remove(struct pw_context *ctx, uint64_t page)
{
	uint64_t ps = ctx->page_size;
	uint64_t *r = ctx->away.pairs;
	for (int i = 0; i + 1 < ctx->away.count; i += 2) {
		uint64_t first = r[i], end = r[i + 1];
		if (page < first || page >= end)
			continue;
		if (first == page && end == page + ps) {
			r[i] = r[ctx->away.count - 2];
			r[i + 1] = r[ctx->away.count - 1];
			ctx->away.count -= 2;
		} else if (first == page) {
			r[i] = page + ps;
		} else if (end == page + ps) {
			r[i + 1] = page;
		} else {
			r[i + 1] = page;
			pw_runs_add(&ctx->away, page + ps, end);
		}
		return;
	}
}

/* ---- taking pages away, bringing them back ---------------------------------------------------------- */

/*
 * Makes [first, end) not the node's for the program, atomically for any thread touching it meanwhile.
 * With userfaultfd the frames' mapping stays and is registered for minor faults (its page cache pages
 * still exist) and for missing ones, then its page table entries are dropped: a touch after that blocks
 * in the kernel until the pager maps the page's new frame; a touch before it still reaches the frame,
 * which the node does not reuse until it is let go. (An anonymous placeholder registered after it is
 * mapped would leave a moment in which a touch finds a zero page and the program's store stays there.)
 * Without userfaultfd, or where the memory file is not shared memory (tmpfs) and so has no minor
 * faults, an inaccessible placeholder replaces the frames in one mmap (the handler's way).
 */
static int take_away(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	size_t n = (size_t)(end - first);
	if (!ctx->minor_faults) {
		if (mmap((void *)(uintptr_t)first, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0)
		    == MAP_FAILED)
			return errno;
		return 0;
	}
	struct uffdio_register reg = {.range = {.start = first, .len = n},
				      .mode = UFFDIO_REGISTER_MODE_MINOR | UFFDIO_REGISTER_MODE_MISSING};
	/* the system call itself for the drop: the library's own madvise (below) is the program's */
	if (ioctl(pager.uffd, UFFDIO_REGISTER, &reg) != 0 || syscall(SYS_madvise, (void *)(uintptr_t)first, n, MADV_DONTNEED) != 0) {
		int e = errno;
		/* the frames go to the node regardless: the program must not keep them, whatever a touch then costs it */
		pw_log(PW_ERROR, "cannot take 0x%lx+%zu away with its page faults caught: %s; it becomes inaccessible",
		       (unsigned long)first, n, strerror(e));
		mmap((void *)(uintptr_t)first, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		return e;
	}
	return 0;
}

/*
 * Unmaps pages from the program for the node and says so, on the pager's connection: under fault_lock
 * nothing may wait for a program thread (which may be in a call on the control connection, or in
 * malloc waiting for the pager), so nothing here allocates or uses the control connection. Each page
 * goes by whether a registration of the library's covers it.
 */
void pw_unmap_for_node(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	uint64_t ps = ctx->page_size;
	for (uint64_t p = first; p < end;) {
		int ours = pw_extent_covers(ctx, p);
		uint64_t q = p + ps;
		while (q < end && pw_extent_covers(ctx, q) == ours)
			q += ps;
		if (ours && take_away(ctx, p, q) == 0)
			pw_runs_add(&ctx->away, p, q);
		p = q;
	}
	/* released even when the page is not (or no longer) the library's: the node must not wait on it */
	pw_let_go(ctx, &ctx->pager_conn, first, end, 0);
}

/*
 * Maps a page the node had taken back at the program's address again: the node brings it in (a major
 * fault if it went to swap) and its frame replaces the placeholder. On the pager thread, with the
 * pager's own connection and no heap allocation.
 */
static int map_back(struct pw_context *ctx, uint64_t page)
{
	uint64_t ps = ctx->page_size;
	int e = 0;
	for (int attempt = 0; attempt < 1000; attempt++) {
		/* Hold and map under fault_lock, so that no unmap request for this page is served in between. */
		pthread_mutex_lock(&ctx->fault_lock);
		uint32_t frame = 0;
		e = pw_hold_one(ctx, page, &frame);
		if (!e) {
			off_t at = (off_t)(ctx->frames_offset + (uint64_t)frame * ps);
			if (mmap((void *)(uintptr_t)page, ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ctx->memory_fd, at)
			    == MAP_FAILED)
				e = errno;
			else
				away_remove(ctx, page);
		}
		pthread_mutex_unlock(&ctx->fault_lock);
		if (e != ENOMEM)
			break;
		/* Every frame is mapped by some program: reclaim asked for pages back; they come once unmapped. */
		struct timespec wait = {0, 2 * 1000 * 1000};
		nanosleep(&wait, NULL);
	}
	return e;
}

/* Serves one fault: 0 when the page is the library's and mapped again, ENOENT when it is not the library's. */
static int serve(uint64_t address)
{
	struct pw_context *ctx = owner_of(address);
	pw_log(PW_DEBUG, "fault at 0x%lx: %s", (unsigned long)address, ctx ? "the library's" : "not the library's");
	if (!ctx)
		return ENOENT;
	uint64_t page = address & ~((uint64_t)ctx->page_size - 1);
	int e = map_back(ctx, page);
	if (e)
		pw_log(PW_ERROR, "cannot bring back the page at 0x%lx the node took: %s; the access fails", (unsigned long)address,
		       strerror(e));
	return e;
}

/* How many pages of [first, end) the node has taken away: giving them back needs that many free frames. */
uint64_t pw_away_pages(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	uint64_t pages = 0;
	pthread_mutex_lock(&ctx->fault_lock);
	for (int i = 0; i + 1 < ctx->away.count; i += 2) {
		uint64_t from = ctx->away.pairs[i] > first ? ctx->away.pairs[i] : first;
		uint64_t to = ctx->away.pairs[i + 1] < end ? ctx->away.pairs[i + 1] : end;
		if (to > from)
			pages += (to - from) / ctx->page_size;
	}
	pthread_mutex_unlock(&ctx->fault_lock);
	return pages;
}

/* Whether `page` is one the node took away (fault_lock held). */
static int is_away(struct pw_context *ctx, uint64_t page)
{
	for (int i = 0; i + 1 < ctx->away.count; i += 2)
		if (page >= ctx->away.pairs[i] && page < ctx->away.pairs[i + 1])
			return 1;
	return 0;
}

/*
 * A userfaultfd fault: map the page back and wake the thread; a page that cannot come back faults for
 * real. A page the node did not take is one whose writers a registration or deregistration holds back
 * (pw_freeze; that thread wakes them once the bytes have moved), or a fault already answered.
 */
static void serve_missing(uint64_t address, uint64_t flags)
{
	struct pw_context *ctx = owner_of(address);
	uint64_t ps = ctx ? ctx->page_size : (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t page = address & ~(ps - 1);
	struct uffdio_range range = {.start = page, .len = ps};
	if (ctx) {
		pthread_mutex_lock(&ctx->fault_lock);
		int away = is_away(ctx, page);
		int moving = page >= ctx->shield_first && page < ctx->shield_end;
		pthread_mutex_unlock(&ctx->fault_lock);
		if (!away && moving)
			return;
		if (!away && (flags & UFFD_PAGEFAULT_FLAG_WP)) {
			ioctl(pager.uffd, UFFDIO_WAKE, &range);
			return;
		}
	}
	if (!ctx || serve(address) != 0) {
		/* Not the library's any more, or gone for good: the toucher gets SIGSEGV as it would without the library. */
		ioctl(pager.uffd, UFFDIO_UNREGISTER, &range);
		mprotect((void *)(uintptr_t)page, ps, PROT_NONE);
	}
	ioctl(pager.uffd, UFFDIO_WAKE, &range);
}

static int frozen(uint64_t address);

/*
 * Whether the program may read and write `address` now (/proc/self/maps, read into a static buffer:
 * the pager never allocates). A fault on such a page was a write held by a freeze that has ended
 * (its page has a new mapping, perhaps no longer the library's): the access just runs again.
 */
static int writable_now(uint64_t address)
{
	static char buffer[64 << 10];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int found = 0, done = 0;
	size_t kept = 0;
	while (!done) {
		ssize_t n = read(fd, buffer + kept, sizeof(buffer) - 1 - kept);
		if (n <= 0)
			break;
		size_t have = kept + (size_t)n;
		buffer[have] = 0;
		char *line = buffer, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buffer))) != NULL) {
			*nl = 0;
			char *dash;
			uint64_t from = strtoull(line, &dash, 16), to = 0;
			if (*dash == '-') {
				char *space;
				to = strtoull(dash + 1, &space, 16);
				if (address >= from && address < to) {
					found = space[0] == ' ' && space[1] == 'r' && space[2] == 'w';
					done = 1;
					break;
				}
			}
			line = nl + 1;
		}
		kept = have - (size_t)(line - buffer);
		memmove(buffer, line, kept);
	}
	close(fd);
	return found;
}

/* The handler's fault at `address`: a page the node took is mapped back; any other is left to the program unless it is writable now. */
static uint32_t answer_fault(uint64_t address)
{
	struct pw_context *ctx = owner_of(address);
	if (ctx) {
		uint64_t page = address & ~((uint64_t)ctx->page_size - 1);
		pthread_mutex_lock(&ctx->fault_lock);
		int away = is_away(ctx, page);
		pthread_mutex_unlock(&ctx->fault_lock);
		if (away)
			return serve(address) == 0 ? SLOT_DONE : SLOT_NOT_OURS;
	}
	if (writable_now(address))
		return SLOT_DONE;
	return serve(address) == 0 ? SLOT_DONE : SLOT_NOT_OURS;
}

static void *pager_main(void *arg)
{
	(void)arg;
	pager.tid = (pid_t)syscall(SYS_gettid);
	for (;;) {
		struct pollfd fds[2] = {{.fd = pager.wake_fd, .events = POLLIN}, {.fd = pager.uffd, .events = POLLIN}};
		int n = poll(fds, pager.uffd >= 0 ? 2 : 1, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pager.uffd >= 0 && (fds[1].revents & POLLIN)) {
			struct uffd_msg msgs[16];
			ssize_t r = read(pager.uffd, msgs, sizeof(msgs));
			for (ssize_t i = 0; r > 0 && i < r / (ssize_t)sizeof(msgs[0]); i++)
				if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
					serve_missing(msgs[i].arg.pagefault.address, msgs[i].arg.pagefault.flags);
		}
		if (fds[0].revents & POLLIN) {
			uint64_t count;
			if (read(pager.wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
				break;
			for (int i = 0; i < FAULT_SLOTS; i++) {
				struct fault_slot *slot = &pager.slots[i];
				uint32_t state = atomic_load(&slot->state);
				if (state == SLOT_HELD) {
					/* a write held while its page's bytes moved: once they have, it runs again on the new mapping */
					if (!frozen(slot->address)) {
						atomic_store(&slot->state, SLOT_DONE);
						pager_futex(&slot->state, FUTEX_WAKE, 1);
					}
					continue;
				}
				uint32_t ready = SLOT_READY;
				if (!atomic_compare_exchange_strong(&slot->state, &ready, SLOT_SERVING))
					continue;
				if (frozen(slot->address)) {
					atomic_store(&slot->state, SLOT_HELD);
					continue;
				}
				uint32_t answer = answer_fault(slot->address);
				atomic_store(&slot->state, answer);
				pager_futex(&slot->state, FUTEX_WAKE, 1);
			}
		}
	}
	return NULL;
}

/* ---- holding writers back while the library moves a range's bytes ------------------------------------- */

/* Whether a registration or deregistration holds `address` frozen (the signal path). */
static int frozen(uint64_t address)
{
	int found = 0;
	pthread_mutex_lock(&pager.lock);
	for (int i = 0; i < MAX_CONTEXTS && !found; i++) {
		struct pw_context *ctx = pager.contexts[i];
		found = ctx && address >= __atomic_load_n(&ctx->frozen_first, __ATOMIC_ACQUIRE)
			&& address < __atomic_load_n(&ctx->frozen_end, __ATOMIC_ACQUIRE);
	}
	pthread_mutex_unlock(&pager.lock);
	return found;
}

int pw_freeze(struct pw_context *ctx, uint64_t first, uint64_t end)
{
	if (!ctx->minor_faults) {
		/* the handler's way: writers fault on a read-only range, and the pager holds them until pw_thaw */
		if (!pager.handler_installed)
			return EOPNOTSUPP;
		__atomic_store_n(&ctx->frozen_first, first, __ATOMIC_RELEASE);
		__atomic_store_n(&ctx->frozen_end, end, __ATOMIC_RELEASE);
		if (mprotect((void *)(uintptr_t)first, (size_t)(end - first), PROT_READ) != 0) {
			int e = errno;
			__atomic_store_n(&ctx->frozen_end, 0, __ATOMIC_RELEASE);
			__atomic_store_n(&ctx->frozen_first, 0, __ATOMIC_RELEASE);
			return e;
		}
		return 0;
	}
	if (!pager.write_protect)
		return EOPNOTSUPP;
	struct uffdio_register reg = {.range = {.start = first, .len = end - first}, .mode = UFFDIO_REGISTER_MODE_WP};
	if (ioctl(pager.uffd, UFFDIO_REGISTER, &reg) != 0)
		return errno;
	struct uffdio_writeprotect wp = {.range = {.start = first, .len = end - first}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
	if (ioctl(pager.uffd, UFFDIO_WRITEPROTECT, &wp) != 0) {
		int e = errno;
		struct uffdio_range range = {.start = first, .len = end - first};
		ioctl(pager.uffd, UFFDIO_UNREGISTER, &range);
		return e;
	}
	return 0;
}

void pw_thaw(struct pw_context *ctx, uint64_t first, uint64_t end, int replaced)
{
	if (!ctx->minor_faults) {
		if (!replaced)
			mprotect((void *)(uintptr_t)first, (size_t)(end - first), PROT_READ | PROT_WRITE);
		__atomic_store_n(&ctx->frozen_end, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&ctx->frozen_first, 0, __ATOMIC_RELEASE);
		uint64_t one = 1;
		if (write(pager.wake_fd, &one, sizeof(one)) < 0) {
			/* the pager is gone: nobody is held */
		}
		return;
	}
	uint64_t ps = (uint64_t)sysconf(_SC_PAGESIZE);
	if (!replaced) {
		/* page by page: the parts already replaced are no longer registered, and would fail a ranged call */
		for (uint64_t p = first; p < end; p += ps) {
			struct uffdio_writeprotect wp = {.range = {.start = p, .len = ps}, .mode = 0};
			ioctl(pager.uffd, UFFDIO_WRITEPROTECT, &wp);
			struct uffdio_range range = {.start = p, .len = ps};
			ioctl(pager.uffd, UFFDIO_UNREGISTER, &range);
		}
	}
	struct uffdio_range range = {.start = first, .len = end - first};
	ioctl(pager.uffd, UFFDIO_WAKE, &range);
}

/* ---- starting ---------------------------------------------------------------------------------------- */

/* Opens a userfaultfd for user-mode faults with `features`, or -1. */
static int open_uffd(uint64_t features, uint64_t *granted)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return -1;
	struct uffdio_api api = {.api = UFFD_API, .features = features};
	if (ioctl(fd, UFFDIO_API, &api) != 0 || (api.features & features) != features) {
		int e = errno;
		close(fd);
		errno = e ? e : EOPNOTSUPP;
		return -1;
	}
	*granted = api.features;
	return fd;
}

/*
 * Opens userfaultfd for user-mode faults, or -1 (not allowed here, or not asked for): minor faults on
 * shared memory (Linux 5.14) to catch pages taken away, and where the kernel has it (6.4) write
 * protection of shared and of never-touched anonymous memory, to hold writers while bytes move.
 */
static int open_userfaultfd(void)
{
	enum pw_pager_choice want = pw_settings()->pager;
	if (want == PW_PAGER_SIGNAL)
		return -1;
	uint64_t granted = 0;
	int fd = open_uffd(UFFD_FEATURE_MINOR_SHMEM | UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED, &granted);
	pager.write_protect = fd >= 0;
	if (fd < 0)
		fd = open_uffd(UFFD_FEATURE_MINOR_SHMEM, &granted);
	if (fd < 0) {
		pw_log(want == PW_PAGER_USERFAULTFD ? PW_WARN : PW_INFO,
		       "userfaultfd is not available with minor faults on shared memory (%s): page faults go "
		       "through a SIGSEGV handler",
		       strerror(errno));
		return -1;
	}
	if (!pager.write_protect)
		pw_log(PW_INFO, "userfaultfd cannot write-protect here: a store another thread makes to a page while it is registered or "
				"deregistered may be lost");
	return fd;
}

static int start_pager(void)
{
	pager.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pager.wake_fd < 0)
		return errno;
	pager.uffd = open_userfaultfd();
	if (pthread_create(&pager.thread, NULL, pager_main, NULL) != 0)
		return EAGAIN;
	pthread_detach(pager.thread);
	pager.started = 1;
	return 0;
}

int pw_pager_attach(struct pw_context *ctx)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, pw_pager_register_fork);
	int e = pw_conn_open(&ctx->pager_conn, ctx->dev->socket_path);
	if (e)
		return e;
	pthread_mutex_lock(&pager.lock);
	e = pager.started ? 0 : start_pager();
	if (!e) {
		/* minor faults exist for shared memory only: a memory file elsewhere is served by the handler */
		struct statfs fs;
		ctx->minor_faults = pager.uffd >= 0 && fstatfs(ctx->memory_fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
		if (!ctx->minor_faults)
			pw_pager_install_handler();
		pw_log(PW_INFO, "%s: pages the node takes back are caught by %s", ctx->dev->device.name,
		       ctx->minor_faults ? "userfaultfd (minor faults)" : "the SIGSEGV handler");
	}
	if (!e) {
		e = ENOMEM;
		for (int i = 0; i < MAX_CONTEXTS; i++) {
			if (!pager.contexts[i]) {
				pager.contexts[i] = ctx;
				e = 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&pager.lock);
	if (e)
		pw_log(PW_ERROR, "cannot serve the page faults of %s's registered memory: %s", ctx->dev->device.name, strerror(e));
	return e;
}

void pw_pager_detach(struct pw_context *ctx)
{
	pthread_mutex_lock(&pager.lock);
	for (int i = 0; i < MAX_CONTEXTS; i++)
		if (pager.contexts[i] == ctx)
			pager.contexts[i] = NULL;
	pthread_mutex_unlock(&pager.lock);
	pw_conn_close(&ctx->pager_conn);
	pw_runs_free(&ctx->away);
}

/*
 * The node's kernel wants pages back (a CPU_UNMAP record): unmap them from the program, then say so.
 * With fault_lock held no page is being mapped back. Pages being given back to the program (a
 * deregistration) wait until that is done.
 */
void pw_cpu_unmap(struct pw_context *ctx, uint64_t address, uint64_t length)
{
	uint64_t ps = ctx->page_size;
	uint64_t first = address & ~(ps - 1), end = (address + length + ps - 1) & ~(ps - 1);
	pthread_mutex_lock(&ctx->fault_lock);
	if (first < ctx->shield_end && end > ctx->shield_first) {
		if (pw_runs_add(&ctx->deferred, first, end) != 0)
			pw_unmap_for_node(ctx, first, end); /* no room to wait: serve it now */
		pthread_mutex_unlock(&ctx->fault_lock);
		return;
	}
	pw_unmap_for_node(ctx, first, end);
	pthread_mutex_unlock(&ctx->fault_lock);
}

/*
 * madvise(MADV_DONTNEED) on registered memory drops the pages as the kernel would: the node frees
 * their frames (NIC translations invalidated) and the next touch, the program's or the NIC's, finds a
 * zero page. Pages a PINNED registration holds stay put: their bytes are zeroed instead.
 */
__attribute__((visibility("default"))) int madvise(void *addr, size_t length, int advice)
{
	static int (*real)(void *, size_t, int);
	if (!real)
		real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
	if (advice == MADV_DONTNEED && length > 0) {
		pthread_mutex_lock(&pager.lock);
		for (int i = 0; i < MAX_CONTEXTS; i++) {
			struct pw_context *ctx = pager.contexts[i];
			if (!ctx)
				continue;
			uint64_t ps = ctx->page_size;
			uint64_t from = (uintptr_t)addr & ~(ps - 1), to = ((uintptr_t)addr + length + ps - 1) & ~(ps - 1);
			pthread_mutex_lock(&ctx->fault_lock);
			pthread_mutex_lock(&ctx->mr_lock);
			for (uint64_t p = from; p < to; p += ps) {
				if (!pw_covered(ctx, p))
					continue;
				if (take_away(ctx, p, p + ps) == 0)
					pw_runs_add(&ctx->away, p, p + ps);
				int e = pw_let_go(ctx, &ctx->pager_conn, p, p + ps, 1);
				if (e) {
					/* pinned: the page stays the NIC's and the program's; it reads zeros as after MADV_DONTNEED */
					uint32_t frame;
					if (!pw_hold_one(ctx, p, &frame)) {
						off_t at = (off_t)(ctx->frames_offset + (uint64_t)frame * ps);
						if (mmap((void *)(uintptr_t)p, ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
							 ctx->memory_fd, at)
						    != MAP_FAILED) {
							away_remove(ctx, p);
							memset((void *)(uintptr_t)p, 0, ps);
						}
					}
				}
			}
			pthread_mutex_unlock(&ctx->mr_lock);
			pthread_mutex_unlock(&ctx->fault_lock);
		}
		pthread_mutex_unlock(&pager.lock);
	}
	return real(addr, length, advice);
}
