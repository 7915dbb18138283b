/*
 * res_cpu.c - escape attempt: a CPU burner is killed by RLIMIT_CPU (SIGXCPU, exit 152).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 152
 * OPTS: --cpu 1 --timeout 20
 */

#include "tests/escape/escape.h"

int
main(void)
{
	volatile unsigned long x = 0;

	for (;;)
		x++;
}
