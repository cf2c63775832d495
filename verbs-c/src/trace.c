/*
 * The library's hop trace (PAGEWIRE_VERBS_HOP_TRACE=DIRECTORY): the moment and thread of each step a
 * message takes through the library (a post, a ring of the node's bell, a completion moved from the
 * event ring into its CQ, a poll that found one, a poll's sleep and wake), kept in one array and written
 * as text to DIRECTORY/PROGRAM-PID.hops when the program ends, in the node's trace format
 * (pagewire.node.hopTraceDirectory), so that `pagewire hops` lines both up.
 * CLOCK_MONOTONIC is the clock the node's trace (System.nanoTime) reads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"
#include "settings.h"
#include "trace.h"

static const char *const hop_names[PW_HOP_COUNT] = {
	[PW_HOP_POST_SEND] = "APP_POST_SEND",
	[PW_HOP_POST_RECV] = "APP_POST_RECV",
	[PW_HOP_NODE_BELL] = "APP_RANG_NODE",
	[PW_HOP_CQ_PUSH] = "APP_CQ_PUSH",
	[PW_HOP_POLL_COMPLETION] = "APP_POLL_COMPLETION",
	[PW_HOP_POLL_SLEEP] = "APP_POLL_SLEEP",
	[PW_HOP_POLL_WAKE] = "APP_POLL_WAKE",
};

struct hop_event {
	uint64_t ns;
	uint32_t tid;
	uint32_t hop; /* hop + 1: 0 is an entry claimed but not yet written */
};

static struct hop_event *events;
static uint64_t capacity;
static uint64_t next_event;
static char *trace_directory;
/* The node of the program's first context: the trace's reader pairs programs with nodes by it. */
static char trace_node[128];
/* 1 when a trace is armed; read by every mark, written once before any. */
int pw_tracing;

/* At exit: named by the pid then, so that a forked child's trace does not overwrite its parent's. */
static void write_trace(void)
{
	char file[4096];
	snprintf(file, sizeof(file), "%s/%s-%d.hops", trace_directory, program_invocation_short_name, (int)getpid());
	FILE *f = fopen(file, "w");
	if (!f) {
		pw_log(PW_WARN, "cannot write the hop trace %s: %s", file, strerror(errno));
		return;
	}
	uint64_t taken = __atomic_load_n(&next_event, __ATOMIC_SEQ_CST);
	uint64_t kept = taken < capacity ? taken : capacity;
	fprintf(f, "# pagewire hop trace: program %s, pid %d, on node %s; %llu events kept of %llu\n", program_invocation_short_name,
		(int)getpid(), trace_node[0] ? trace_node : "(none)", (unsigned long long)kept, (unsigned long long)taken);
	fprintf(f, "# nanoseconds (CLOCK_MONOTONIC) hop thread\n");
	for (uint64_t i = 0; i < kept; i++) {
		struct hop_event *e = &events[i];
		uint32_t hop = __atomic_load_n(&e->hop, __ATOMIC_ACQUIRE);
		if (hop == 0 || hop > PW_HOP_COUNT)
			continue;
		fprintf(f, "%llu %s tid-%u\n", (unsigned long long)e->ns, hop_names[hop - 1], e->tid);
	}
	fclose(f);
}

/* The calling thread's id, asked of the kernel once per thread. */
static __thread uint32_t tid;

/* A forked child's trace starts empty (the events before the fork are the parent's, in the parent's file), its thread its own. */
static void forget_parents_events(void)
{
	__atomic_store_n(&next_event, 0, __ATOMIC_SEQ_CST);
	tid = 0;
}

__attribute__((constructor)) static void arm_trace(void)
{
	const struct pw_settings *settings = pw_settings();
	if (!settings->hop_trace_directory)
		return;
	capacity = settings->hop_trace_events;
	events = calloc(capacity, sizeof(*events));
	trace_directory = strdup(settings->hop_trace_directory);
	if (!events || !trace_directory) {
		pw_log(PW_WARN, "no memory for a hop trace of %llu events; tracing nothing", (unsigned long long)capacity);
		free(events);
		free(trace_directory);
		return;
	}
	pw_tracing = 1;
	pthread_atfork(NULL, NULL, forget_parents_events);
	atexit(write_trace);
}

void pw_trace_mark_now(enum pw_hop hop)
{
	uint64_t i = __atomic_fetch_add(&next_event, 1, __ATOMIC_RELAXED);
	if (i >= capacity)
		return;
	if (!tid)
		tid = (uint32_t)syscall(SYS_gettid);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	events[i].ns = (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
	events[i].tid = tid;
	__atomic_store_n(&events[i].hop, (uint32_t)hop + 1, __ATOMIC_RELEASE);
}

void pw_trace_node(const char *node_id)
{
	if (pw_tracing && !trace_node[0])
		snprintf(trace_node, sizeof(trace_node), "%s", node_id);
}
