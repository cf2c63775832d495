/*
 * What the library's files share about a context and the library's settings: the endpoint a
 * context's calls name, and the mode plain registrations get.
 */
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

