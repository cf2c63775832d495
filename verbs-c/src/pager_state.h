/*
 * The pager's state, which its three files share: pager.c (taking pages away and serving their faults,
 * one thread per process), pager_signal.c (the SIGSEGV handler of the signal path, and sigaction and
 * signal interposed so a program's own handler stays behind it) and pager_fork.c (fork's copies).
 */
#ifndef PAGEWIRE_VERBS_PAGER_STATE_H
#define PAGEWIRE_VERBS_PAGER_STATE_H

#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pw.h"

#define MAX_CONTEXTS 64
#define FAULT_SLOTS 64

enum { SLOT_FREE, SLOT_CLAIMED, SLOT_READY, SLOT_SERVING, SLOT_DONE, SLOT_NOT_OURS, SLOT_HELD };

/* One fault handed from the SIGSEGV handler to the pager: the handler's thread waits on `state`. */
struct fault_slot {
	_Atomic uint32_t state;
	uint64_t address;
};

struct pager_state {
	pthread_mutex_t lock; /* starting and stopping; the context table */
	struct pw_context *contexts[MAX_CONTEXTS];
	int started;
	int uffd; /* -1: the signal path */
	int write_protect; /* userfaultfd can hold writers back (pw_freeze) */
	int wake_fd; /* eventfd: the handler wakes the pager */
	pid_t tid; /* the pager thread: a fault of its own is never waited for */
	pthread_t thread;
	struct sigaction previous; /* the program's SIGSEGV handler, to which faults not the library's go */
	int handler_installed;
	struct fault_slot slots[FAULT_SLOTS];
	int fork_done[2]; /* the child closes its end once it has its copies */
};

extern struct pager_state pager;

static inline long pager_futex(_Atomic uint32_t *word, int op, uint32_t value)
{
	return syscall(SYS_futex, (uint32_t *)word, op, value, NULL, NULL, 0);
}

/* pager_signal.c: installs the SIGSEGV handler in front of the program's (pager.lock held). */
void pw_pager_install_handler(void);
/* pager_fork.c: registers fork's handlers (once). */
void pw_pager_register_fork(void);

#endif
