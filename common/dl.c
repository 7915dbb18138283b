/*
 * dl.c - a library loaded when it is first needed (dlopen), not linked.
 *
 * capbroker links libraries only some brokers use: libpq (a broker with
 * --cluster), libldns (a sandbox that resolves names through the broker),
 * libsystemd (serve under systemd).  Linked, each `capbroker run` paid for
 * loading and relocating them and the twenty-odd libraries they bring, at
 * every start (docs/performance.md, "Loading the broker").  A module that
 * uses one lists the functions it calls; cb_dl_load() resolves them all or
 * none.
 *
 * Trust domain: any.  The names are the program's own constants; the
 * library is found by its soname on the system's search path, as the
 * dynamic linker would have found it at start.
 */
#include "common/common.h"

#include <dlfcn.h>
#include <stdio.h>

int
cb_dl_load(const char *soname, const struct cb_dl_sym *syms, size_t n, char *why,
    size_t whylen)
{
	void *h;
	size_t i;

	/* RTLD_NOW: a missing function is found here, not at its first call
	 * on some later request; RTLD_LOCAL: its names never satisfy another
	 * library's.  It stays loaded (never dlclose'd): the pointers live as
	 * long as the process. */
	if (!(h = dlopen(soname, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(why, whylen, "%s", dlerror());
		goto fail;
	}
	for (i = 0; i < n; i++) {
		/* POSIX's way to store dlsym's result in a function pointer. */
		if (!(*syms[i].addr = dlsym(h, syms[i].name))) {
			snprintf(why, whylen, "%s lacks %s", soname, syms[i].name);
			goto fail;
		}
	}
	if (whylen)
		why[0] = '\0';
	return 0;
fail:
	for (i = 0; i < n; i++)
		*syms[i].addr = NULL;
	return CB_EUNSUPPORTED;
}
