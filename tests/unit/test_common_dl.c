/*
 * test_common_dl.c - libraries loaded when first needed (common/dl.c):
 * cb_dl_load resolves every function or none, and says what is missing.
 */
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "tests/tap.h"

int
main(void)
{
	struct { __typeof__(getpid) *getpid; __typeof__(strlen) *strlen; } f;
	struct cb_dl_sym ok[] = {
		{ "getpid", (void **)&f.getpid },
		{ "strlen", (void **)&f.strlen },
	};
	struct cb_dl_sym bad[] = {
		{ "getpid", (void **)&f.getpid },
		{ "cb_no_such_function", (void **)&f.strlen },
	};
	char why[128];

	T_ERR(cb_dl_load("libc.so.6", ok, 2, why, sizeof(why)), 0, "libc's getpid and strlen load");
	T_OK(f.getpid && f.getpid() == getpid() && f.strlen && f.strlen("four") == 4,
	    "... and are the functions");
	T_ERR(cb_dl_load("libc.so.6", bad, 2, why, sizeof(why)), CB_EUNSUPPORTED,
	    "a missing function: the library is refused");
	T_OK(f.getpid == NULL && f.strlen == NULL, "... and no pointer is left set");
	T_OK(strstr(why, "cb_no_such_function") != NULL, "... and why names it");
	f.getpid = getpid;
	T_ERR(cb_dl_load("libcb-no-such-library.so.0", ok, 2, why, sizeof(why)), CB_EUNSUPPORTED,
	    "a missing library is refused");
	T_OK(f.getpid == NULL && why[0] != '\0', "... with no pointer set, and a reason");
	return t_done();
}
