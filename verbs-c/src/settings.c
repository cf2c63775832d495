/*
 * What the library's files share about a context and the library's settings: the endpoint a
 * context's calls name, the mode plain registrations get, how long empty polls spin, yield and sleep,
 * and where the hop trace goes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "pw.h"

Pagewire__Verbs__V1__RegistrationMode pw_plain_mode(void)
{
	const char *s = getenv("PAGEWIRE_VERBS_REGISTRATION");
	if (!s || !*s || !strcasecmp(s, "PINNED"))
		return PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PINNED;
	if (!strcasecmp(s, "PIN_ON_MISS"))
		return PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PIN_ON_MISS;
	if (!strcasecmp(s, "SHADOW"))
		return PAGEWIRE__VERBS__V1__REGISTRATION_MODE__SHADOW;
	if (!strcasecmp(s, "ON_DEMAND"))
		return PAGEWIRE__VERBS__V1__REGISTRATION_MODE__ON_DEMAND;
	pw_log(PW_WARN, "PAGEWIRE_VERBS_REGISTRATION=%s is not PINNED, PIN_ON_MISS, SHADOW or ON_DEMAND; registering PINNED", s);
	return PAGEWIRE__VERBS__V1__REGISTRATION_MODE__PINNED;
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

static void read_settings(void)
{
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
