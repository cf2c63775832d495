/*
 * The program's RDMA stack, checked once when the library loads: libibverbs' and librdmacm's entry points
 * must both be this library's. rdma-core's librdmacm over this library's verbs (or this library's connection
 * manager over rdma-core's libibverbs) would run one library's code on the other's objects; such a program is
 * refused with a message that says how to start it, instead of being left to crash.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pw.h"
#include "stack.h"

/* Where this library was loaded from, for the message. */
static const char *own_path(void)
{
	Dl_info self;
	if (dladdr((void *)own_path, &self) && self.dli_fname)
		return self.dli_fname;
	return "libpagewire-verbs.so";
}

void pw_refuse_mixed_stack(const char *what)
{
	const char *self = own_path();
	const char *name = strrchr(self, '/') ? strrchr(self, '/') + 1 : self;
	if (!strcmp(name, "libpagewire-verbs.so"))
		pw_log(PW_ERROR,
		       "%s: rdma-core's libibverbs and librdmacm do not run over Pagewire's (%s answers both). Start the program "
		       "with `pagewire run --node HOST:PORT -- PROGRAM ARGS`, or with LD_PRELOAD=%s alone (docs/verbs.md)",
		       what, self, self);
	else
		pw_log(PW_ERROR,
		       "%s: rdma-core's libibverbs and librdmacm do not run over Pagewire's (%s answers both). Start the program "
		       "with `pagewire run --node HOST:PORT -- PROGRAM ARGS`, or with LD_LIBRARY_PATH naming a directory where "
		       "libibverbs.so.1 and librdmacm.so.1 are both this file, as verbs-c/target/lib has them (docs/verbs.md)",
		       what, self);
}

/* The object that answers NAME for the program (the first in the global scope), if it is not this library. */
static const char *foreign_definition(const char *name)
{
	Dl_info self, at;
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f || !dladdr((void *)own_path, &self) || !dladdr(f, &at))
		return NULL;
	return at.dli_fbase == self.dli_fbase ? NULL : (at.dli_fname ? at.dli_fname : "another library");
}

__attribute__((constructor)) static void check_stack(void)
{
	static const char *entry_points[] = { "ibv_get_device_list", "ibv_open_device", "rdma_create_event_channel", "rdma_create_id" };
	for (size_t i = 0; i < sizeof(entry_points) / sizeof(entry_points[0]); i++) {
		const char *other = foreign_definition(entry_points[i]);
		if (other) {
			char what[512];
			snprintf(what, sizeof(what), "this program's %s comes from %s, ahead of Pagewire's", entry_points[i], other);
			pw_refuse_mixed_stack(what);
			_exit(127);
		}
	}
}
