/*
 * The pager's signal path, for memory userfaultfd cannot catch: the SIGSEGV handler only hands the
 * address to the pager thread (an eventfd write) and waits on a futex for its answer, so nothing in it
 * allocates, locks or talks to the node. sigaction and signal are interposed: a handler the program
 * installs later is kept behind the library's and gets every fault that is not the library's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "pager_state.h"

/* ---- the SIGSEGV handler of the signal path: hands the address over and waits ------------------------ */

static void chain(int signo, siginfo_t *info, void *uc)
{
	if (pager.previous.sa_flags & SA_SIGINFO) {
		pager.previous.sa_sigaction(signo, info, uc);
	} else if (pager.previous.sa_handler != SIG_DFL && pager.previous.sa_handler != SIG_IGN) {
		pager.previous.sa_handler(signo);
	} else {
		/* The default action: restore it; the access runs again and takes it. */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		syscall(SYS_rt_sigaction, SIGSEGV, &dfl, NULL, 8);
	}
}

static void on_segv(int signo, siginfo_t *info, void *uc)
{
	int saved = errno;
	if (pager.started && (pid_t)syscall(SYS_gettid) != pager.tid) {
		int slot = -1;
		while (slot < 0) {
			for (int i = 0; i < FAULT_SLOTS && slot < 0; i++) {
				uint32_t free_state = SLOT_FREE;
				if (atomic_compare_exchange_strong(&pager.slots[i].state, &free_state, SLOT_CLAIMED))
					slot = i;
			}
			if (slot < 0)
				syscall(SYS_sched_yield);
		}
		struct fault_slot *s = &pager.slots[slot];
		s->address = (uintptr_t)info->si_addr;
		atomic_store(&s->state, SLOT_READY);
		uint64_t one = 1;
		if (write(pager.wake_fd, &one, sizeof(one)) < 0) {
			/* the pager is gone: as if the library were not there */
		}
		uint32_t state;
		while ((state = atomic_load(&s->state)) == SLOT_READY || state == SLOT_SERVING || state == SLOT_HELD)
			pager_futex(&s->state, FUTEX_WAIT, state);
		atomic_store(&s->state, SLOT_FREE);
		if (state == SLOT_DONE) {
			errno = saved;
			return; /* the access runs again, on the page mapped back */
		}
	}
	chain(signo, info, uc); /* not the library's fault: as if the library were not there */
	errno = saved;
}

/* ---- a program's own SIGSEGV handler stays behind the library's ------------------------------------- */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn real_sigaction(void)
{
	static sigaction_fn real;
	if (!real)
		real = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	return real;
}

__attribute__((visibility("default"))) int sigaction(int signum, const struct sigaction *act, struct sigaction *oldact)
{
	if (signum != SIGSEGV || !pager.handler_installed)
		return real_sigaction()(signum, act, oldact);
	/* The program sees (and sets) its own handler; the library's stays installed in front of it. */
	struct sigaction was = pager.previous;
	if (act)
		pager.previous = *act;
	if (oldact)
		*oldact = was;
	return 0;
}

__attribute__((visibility("default"))) sighandler_t signal(int signum, sighandler_t handler)
{
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (sigaction(signum, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* The SIGSEGV handler, for contexts whose pages cannot be caught with userfaultfd. pager.lock held. */
void pw_pager_install_handler(void)
{
	if (pager.handler_installed)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	real_sigaction()(SIGSEGV, &sa, &pager.previous);
	pager.handler_installed = 1;
}
