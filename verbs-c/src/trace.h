/* trace.c: the hop trace (PAGEWIRE_VERBS_HOP_TRACE), written when the program ends */
#ifndef PAGEWIRE_VERBS_TRACE_H
#define PAGEWIRE_VERBS_TRACE_H

#include "pw.h"

enum pw_hop {
	PW_HOP_POST_SEND,       /* a send-side post entered the library */
	PW_HOP_POST_RECV,       /* a receive post entered the library */
	PW_HOP_NODE_BELL,       /* the library rang the bell of a node asleep */
	PW_HOP_CQ_PUSH,         /* a completion moved from the event ring into its CQ */
	PW_HOP_POLL_COMPLETION, /* a poll found completions */
	PW_HOP_POLL_SLEEP,      /* an empty poll went to sleep on the context's bell */
	PW_HOP_POLL_WAKE,       /* ... and the bell woke it */
	PW_HOP_COUNT
};
extern int pw_tracing;
void pw_trace_mark_now(enum pw_hop hop);
/* Names the node the program's trace is taken on (its first context's). */
void pw_trace_node(const char *node_id);
static inline void pw_trace_mark(enum pw_hop hop)
{
	if (__builtin_expect(pw_tracing, 0))
		pw_trace_mark_now(hop);
}

#endif
