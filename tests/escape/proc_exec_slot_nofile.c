/*
 * proc_exec_slot_nofile.c - escape attempt: a policy's huge open_files cannot make the exec slot reachable.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * OPTS: --nofile 1000000
 *
 * proc_exec_slot.c again, under a policy whose open_files (1000000) lies far
 * above the exec slot (4095): the broker must clamp the limit below the
 * slot (SBX_NOFILE_MAX), or the agent could dup a file of its choice to
 * descriptor 4095 and hand it to the one exec pid 1 lets through.
 */
#include "tests/escape/proc_exec_slot.c"
