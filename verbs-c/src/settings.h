/* settings.c: the library's settings from the environment, and what they name */
#ifndef PAGEWIRE_VERBS_SETTINGS_H
#define PAGEWIRE_VERBS_SETTINGS_H

#include "pw.h"

/* How the library catches a touch of a page the node took back (PAGEWIRE_VERBS_PAGER). */
enum pw_pager_choice {
	PW_PAGER_DEFAULT,     /* userfaultfd where the kernel allows it, else the SIGSEGV handler */
	PW_PAGER_USERFAULTFD, /* asked for: the same, and a warning when it falls back */
	PW_PAGER_SIGNAL,      /* the SIGSEGV handler */
};

/*
 * The library's settings from the environment, each read and checked once, here and nowhere else
 * (settings.c; docs/verbs.md lists them): a value that does not fit is said and replaced by the default.
 */
struct pw_settings {
	const char *nodes;          /* PAGEWIRE_NODE: the node(s), comma-separated (HOST:PORT, node id or socket path) */
	const char *ring_directory; /* PAGEWIRE_VERBS_RING_DIRECTORY: where the nodes' verbs sockets are */
	const char *socket;         /* PAGEWIRE_VERBS_SOCKET: the first node's socket, when it is elsewhere (NULL: none) */
	Pagewire__Verbs__V1__RegistrationMode registration; /* PAGEWIRE_VERBS_REGISTRATION: the mode plain registrations get */
	enum pw_pager_choice pager; /* PAGEWIRE_VERBS_PAGER */
	int64_t spin_ns;        /* PAGEWIRE_VERBS_SPIN_US: how long a CQ polls empty before its polls yield */
	int64_t sleep_after_ns; /* PAGEWIRE_VERBS_SLEEP_AFTER_US: how long a context's CQs poll empty before a poll sleeps */
	int64_t sleep_after_max_ns; /* PAGEWIRE_VERBS_SLEEP_AFTER_MAX_US: as long as twice the recent waits, up to this */
	uint32_t sleep_us;      /* PAGEWIRE_VERBS_SLEEP_US: the longest one empty poll sleeps on the bell (0: never) */
	const char *hop_trace_directory; /* PAGEWIRE_VERBS_HOP_TRACE: where the hop trace goes at exit, or NULL for none */
	uint64_t hop_trace_events;       /* PAGEWIRE_VERBS_HOP_TRACE_EVENTS: how many events it keeps */
};
const struct pw_settings *pw_settings(void);

/* The registration mode plain registrations get (PAGEWIRE_VERBS_REGISTRATION). */
Pagewire__Verbs__V1__RegistrationMode pw_plain_mode(void);

/* The endpoint a context is, as the node's calls name it. */
Pagewire__Verbs__V1__EndpointRef pw_endpoint(struct pw_context *ctx);

#endif
