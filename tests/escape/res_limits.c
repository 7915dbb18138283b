/*
 * res_limits.c - escape attempt: hard limits are set and cannot be raised; no core dumps.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/resource.h>
#include <sys/prctl.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static const int res[] = { RLIMIT_AS, RLIMIT_DATA, RLIMIT_NOFILE, RLIMIT_NPROC,
	    RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_CORE };
	struct rlimit rl;

	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		char what[32];

		getrlimit(res[i], &rl);
		if (rl.rlim_max == RLIM_INFINITY)
			esc_escaped("limit %d is infinite", res[i]);
		rl.rlim_max = rl.rlim_max == RLIM_INFINITY ? rl.rlim_max : rl.rlim_max + 1;
		snprintf(what, sizeof(what), "raising limit %d", res[i]);
		esc_errno(setrlimit(res[i], &rl), what, EPERM, 0);
	}
	getrlimit(RLIMIT_CORE, &rl);
	esc_true(rl.rlim_cur == 0 && rl.rlim_max == 0, "core dumps are possible");
	esc_true(prctl(PR_GET_DUMPABLE) == 1 || rl.rlim_max == 0, "dumpable with cores");
	return esc_done("AS, DATA, NOFILE, NPROC, FSIZE, CPU, CORE=0 are hard limits");
}
