/*
 * What the library's files share about a context and the library's settings: every environment
 * variable the library reads, read and checked here once (which nodes, where their sockets are, the
 * mode plain registrations get, how pages taken back are caught, how long empty polls spin, yield and
 * sleep, where the hop trace goes, how much it logs), the log itself, and the endpoint a context's calls name.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pw.h"
#include "settings.h"

Pagewire__Verbs__V1__RegistrationMode pw_plain_mode(void)
{
	return pw_settings()->registration;
}

Pagewire__Verbs__V1__EndpointRef pw_endpoint(struct pw_context *ctx)
{
	Pagewire__Verbs__V1__EndpointRef ref = PAGEWIRE__VERBS__V1__ENDPOINT_REF__INIT;
	ref.endpoint_id = ctx->endpoint_id;
	ref.session_key = ctx->session_key;
	return ref;
}

static struct pw_settings settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

/* A whole number (of `unit`) from the environment, or `fallback` when unset or outside [least, most] (said). */
static uint64_t whole(const char *name, uint64_t fallback, uint64_t least, uint64_t most, const char *unit)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return fallback;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end || *s == '-' || v < least || v > most) {
		pw_log(PW_WARN, "%s=%s is not a number of %s from %llu to %llu; using %llu", name, s, unit, (unsigned long long)least,
		       (unsigned long long)most, (unsigned long long)fallback);
		return fallback;
	}
	return v;
}

/* One of `choices` (case-insensitive) from the environment: its index, or `fallback` when unset or none of them (said). */
static int choice(const char *name, const char *const *choices, int count, int fallback)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return fallback;
	for (int i = 0; i < count; i++)
		if (!strcasecmp(s, choices[i]))
			return i;
	char listed[256] = "";
	for (int i = 0; i < count; i++)
		snprintf(listed + strlen(listed), sizeof(listed) - strlen(listed), "%s%s", i ? ", " : "", choices[i]);
	pw_log(PW_WARN, "%s=%s is not one of %s; using %s", name, s, listed, choices[fallback]);
	return fallback;
}

/* A string from the environment, or `fallback` when unset or empty. */
static const char *text(const char *name, const char *fallback)
{
	const char *s = getenv(name);
	return s && *s ? s : fallback;
}

static void read_settings(void)
{
	settings.nodes = text("PAGEWIRE_NODE", "127.0.0.1:7100");
	settings.ring_directory = text("PAGEWIRE_VERBS_RING_DIRECTORY", "/dev/shm");
	settings.socket = text("PAGEWIRE_VERBS_SOCKET", NULL);
	static const char *const modes[] = { "PINNED", "PIN_ON_MISS", "SHADOW", "ON_DEMAND" };
	static const Pagewire__Verbs__V1__RegistrationMode mode_values[] = {
		PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PINNED, PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PIN_ON_MISS,
		PAGEWIRE__VERBS__V1__REGISTRATION_MODE__SHADOW, PAGEWIRE__VERBS__V1__REGISTRATION_MODE__ON_DEMAND
	};
	settings.registration = mode_values[choice("PAGEWIRE_VERBS_REGISTRATION", modes, 4, 0)];
	static const char *const pagers[] = { "userfaultfd", "signal" };
	settings.pager = !getenv("PAGEWIRE_VERBS_PAGER") || !*getenv("PAGEWIRE_VERBS_PAGER")
				 ? PW_PAGER_DEFAULT
				 : (enum pw_pager_choice)(choice("PAGEWIRE_VERBS_PAGER", pagers, 2, 0) + 1);
	settings.spin_ns = (int64_t)whole("PAGEWIRE_VERBS_SPIN_US", 3, 0, 10000000, "microseconds") * 1000;
	settings.sleep_after_ns = (int64_t)whole("PAGEWIRE_VERBS_SLEEP_AFTER_US", 100, 0, 100000000, "microseconds") * 1000;
	settings.sleep_after_max_ns = (int64_t)whole("PAGEWIRE_VERBS_SLEEP_AFTER_MAX_US", 1000, 0, 100000000, "microseconds") * 1000;
	if (settings.sleep_after_max_ns < settings.sleep_after_ns)
		settings.sleep_after_max_ns = settings.sleep_after_ns; /* no longer than the floor: a fixed threshold */
	settings.sleep_us = (uint32_t)whole("PAGEWIRE_VERBS_SLEEP_US", 1000, 0, 100000, "microseconds");
	const char *trace = getenv("PAGEWIRE_VERBS_HOP_TRACE");
	settings.hop_trace_directory = trace && *trace ? trace : NULL;
	settings.hop_trace_events = whole("PAGEWIRE_VERBS_HOP_TRACE_EVENTS", 1000000, 1, 100000000, "events");
}

const struct pw_settings *pw_settings(void)
{
	pthread_once(&settings_once, read_settings);
	return &settings;
}

static int log_level;
static const char *log_value_refused;
static int log_refusal_said;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* Logs nothing itself: pw_log asks for the level, and a call back into this once would never return. */
static void read_log_level(void)
{
	const char *s = getenv("PAGEWIRE_VERBS_LOG");
	log_level = !s || !*s || !strcasecmp(s, "warn") ? PW_WARN : !strcasecmp(s, "error") ? PW_ERROR : !strcasecmp(s, "info") ? PW_INFO
		  : !strcasecmp(s, "debug") ? PW_DEBUG : -1;
	if (log_level < 0) {
		log_level = PW_WARN;
		log_value_refused = s;
	}
}

/* PAGEWIRE_VERBS_LOG's level, read once on its own (the other settings' checks log). */
static int pw_log_level(void)
{
	pthread_once(&log_once, read_log_level);
	if (log_value_refused && !__atomic_exchange_n(&log_refusal_said, 1, __ATOMIC_RELAXED))
		pw_log(PW_WARN, "PAGEWIRE_VERBS_LOG=%s is not one of error, warn, info, debug; using warn", log_value_refused);
	return log_level;
}

/* Says a line on stderr at `level` or below PAGEWIRE_VERBS_LOG's. */
void pw_log(enum pw_level level, const char *fmt, ...)
{
	if ((int)level > pw_log_level())
		return;
	static const char *names[] = { "error", "warn", "info", "debug" };
	char line[2048];
	int at = snprintf(line, sizeof(line), "pagewire-verbs %s: ", names[level]);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + at, sizeof(line) - (size_t)at - 1, fmt, ap);
	va_end(ap);
	size_t n = strlen(line);
	line[n++] = '\n';
	/* One write(2), not stdio: the library's own threads never take the program's locks (stderr's among them). */
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere else to say it */
	}
}
