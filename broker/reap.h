/*
 * reap.h - reaping, off the loop's path, the stubs nobody watches any more
 * (reap.c), private to broker/.
 */
#ifndef CB_BROKER_REAP_H
#define CB_BROKER_REAP_H

#include "broker/core.h"

/* Take p, a stub the caller gives up on (killed or not: p's descriptors
 * are closed here at once, which ends a pooled sandbox waiting for its
 * hand-over too), and reap it without waiting: now if it has exited,
 * else at a later tick (brk_reap_tick); its cgroups are removed then.  p
 * is left empty (no pid, every descriptor -1), as sbx_proc_close leaves
 * it.  Loop thread only.  Never blocks: a stub that cannot die at once
 * (stuck in the kernel, a pid 1 slow to end its sandbox) must not stop
 * the loop that serves every other sandbox. */
void brk_reap_later(struct brk *b, struct sbx_proc *p);

/* Reap those of them that have exited (the once-a-second tick). */
void brk_reap_tick(struct brk *b);

/* The broker is going away, its loop no longer run: kill and reap every
 * one still there, waiting for each (no sandbox is left behind). */
void brk_reap_close(struct brk *b);

#endif
