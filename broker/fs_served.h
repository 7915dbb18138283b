/*
 * fs_served.h - the broker's side of the file server (fsrv/): which trees a
 * sandbox is served, the authorisation of every FUSE operation against the
 * sandbox's live tokens, the mounts handed to the sandbox, the audit of
 * what the server did, and the invalidation of the kernel's caches when a
 * token stops counting.
 *
 * Trust domain: broker.  The operations come from a hostile agent through
 * the kernel's FUSE driver; fsrv/ acts, this file decides.  See
 * docs/fsrv.md ("Wired into the broker") and docs/sandbox.md.
 *
 * Threads: everything here runs on the broker's loop thread except the
 * server itself, which runs on a thread of its own per sandbox (it serves,
 * nothing else, so a slow disk or a request flood of one sandbox never
 * stalls the loop or another sandbox).  The loop hands that thread a
 * snapshot of the sandbox's fs.* grants (rebuilt on every token change,
 * revocation and tick); the thread hands the loop audit records.
 */
#ifndef CB_BROKER_FS_SERVED_H
#define CB_BROKER_FS_SERVED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/core.h"
#include "sandbox-stub/sandbox.h"

struct brk_fss;

/* In brk_sbx_create, after the grants: when the sandbox's tier is medium or
 * high and the workspace was named (serve_workspace, or the tier's own
 * workspace), mint the workspace token: fs.read, fs.list, fs.write and
 * fs.delete on WORKSPACE/ ** (which covers WORKSPACE itself), each only if
 * inside the tier's ceiling (a policy narrows them there).  0, or an error
 * with a sentence in why. */
struct brk_fss_mint {
	uint64_t now, ttl;	/* valid from now for ttl seconds */
	const char *actor;	/* on whose word (NULL: "broker") */
};
int brk_fss_workspace(struct brk_sbx *s, bool serve_workspace, const struct brk_fss_mint *m,
    char *why, size_t whylen) CB_WARN_UNUSED;

/* In brk_sbx_create, before the spawn: start serving every tree the
 * sandbox's tokens cover (the workspace; the root of every fs.* grant),
 * medium and high tiers only, and in the high tier every writable bind (a
 * token of its own, then served at its destination instead of bound: cfg's
 * binds are replaced by the rest); fill cfg->mounts and (when it is NULL and the
 * workspace is served) cfg->chdir.  The storage stays valid until
 * brk_fss_spawned().  No tree: 0 and nothing changes.  A broker that cannot
 * mount FUSE (not root, no /dev/fuse): CB_EUNSUPPORTED with the reason. */
int brk_fss_start(struct brk_sbx *s, struct sbx_config *cfg, char *why, size_t whylen)
    CB_WARN_UNUSED;

/* The stub has the mounts (sbx_spawn_start returned): drop ours. */
void brk_fss_spawned(struct brk_sbx *s);

/* A broker that is not root: pid 1 sent the connections of the trees it
 * mounted (sbx_proc.fuse_fds, checked by the launcher): serve them.  Call
 * after each sbx_spawn_finish; no-op until they are there, and after. */
void brk_fss_connections(struct brk_sbx *s);

/* The sandbox reported "ready": from now on the tree of a grant it did not
 * start with is mounted at its host path when the grant comes (capctl
 * issue, an approved elevation), through pid 1 (sbx_mount_send). */
void brk_fss_ready(struct brk_sbx *s);

/* The sandbox's tokens changed (added, revoked, expired, a key retired):
 * rebuild its grant snapshot; when a grant went away, drop every name and
 * attribute the kernel caches for its trees; a grant's root that no tree
 * shows yet is mounted (brk_fss_ready).  No-op without a server. */
void brk_fss_refresh(struct brk_sbx *s);

/* brk_fss_refresh for every sandbox (after a revocation; once a second). */
void brk_fss_refresh_all(struct brk *b);

/* After brk_fss_refresh_all: call done(arg) on the loop once the kernel
 * has dropped the cached file pages of every grant lost so far (each
 * server's loss, at most BRK_FSS_SETTLE_MS after it; a server that stops
 * meanwhile counts as done), at once (before returning) when no page drop
 * is under way.  The loop serves on meanwhile: a revocation's answer waits
 * here, not the broker.  0, or CB_ENOMEM (done is not called). */
int brk_fss_when_settled(struct brk *b, void (*done)(void *arg), void *arg) CB_WARN_UNUSED;

/* capctl audit is about to read the log (admin status with flush): write
 * the lines s's file server queued now, through the same path as its
 * batches (denials through the audit budget), instead of up to
 * BRK_FSS_AUD_DELAY_US later, or later still when the loop is busy; the
 * budget is checked again right after, as after every batch.  No-op
 * without a server.  brk_fss_flush_ending: the same for the servers of
 * sandboxes already freed (their last close lines). */
void brk_fss_flush(struct brk_sbx *s);
void brk_fss_flush_ending(struct brk *b);

/* Stop serving: from now on every operation is refused, the audit queue is
 * written, and the server thread ends on its own (closing the FUSE
 * connections: the agent sees ENOTCONN, never a hang).  The close lines of
 * files released after this, or still open when the thread ends (marked
 * so), are written by the loop as they come, in the sandbox's name, and
 * the rest is freed once the thread has ended; the loop never waits for
 * it.  Accepts a sandbox without a server. */
void brk_fss_stop(struct brk_sbx *s);

/* The broker is shutting down (brk_free, after every sandbox is freed,
 * before the log closes): wait for the threads of stopped servers to end,
 * writing their last close lines, at most BRK_FSS_END_MS in all; one that
 * does not end in time is left running (one line says its close lines may
 * be missing). */
void brk_fss_end_all(struct brk *b);

#endif
