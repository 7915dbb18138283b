/*
 * pool.h - the warm pool (pool.c), private to broker/: proc.exec sandboxes
 * built before anyone asks for one, each handed one task.
 */
#ifndef CB_BROKER_POOL_H
#define CB_BROKER_POOL_H

#include "broker/core.h"

/* Take a pooled sandbox built like cfg would be (the low tier, the same
 * read-only binds, each showing the object ids[i] that its path names now,
 * no broker channel, the same mem_bytes, nproc and tmp_bytes) and hand it
 * cfg's task (id, argv, chdir, environment, the other limits): 0 with *out
 * as sbx_spawn_start(cfg, out) would have left it (poll out->status_fd,
 * then sbx_spawn_finish).  CB_ENOENT when none fits: the pool is off
 * (defaults.pool_size 0), empty, or cfg needs something pooled sandboxes
 * are not built with; either way one is asked for, so the next request of
 * that shape may find it.  Another error: the hand-over failed, that
 * sandbox is gone, and the caller starts a fresh one.  Loop thread only. */
int brk_pool_take(struct brk *b, const struct sbx_config *cfg, const struct sbx_src_id *ids,
    struct sbx_proc *out) CB_WARN_UNUSED;

/* Stop the pool's thread and end every sandbox still in the pool (the
 * broker is going away).  Accepts a broker that never had a pool. */
void brk_pool_free(struct brk *b);

#endif
