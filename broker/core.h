/*
 * core.h - the insides of the broker (struct brk) and of a sandbox
 * (struct brk_sbx), and the limits that bound them; private to broker/.
 * Every broker file includes it; the functions are in the header of their
 * concern.
 */
#ifndef CB_BROKER_CORE_H
#define CB_BROKER_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "broker/broker.h"
#include "caps/caps.h"
#include "common/common.h"
#include "policy/policy.h"
#include "sandbox-stub/sandbox.h"
#include "state/state.h"
#include "wire/wire.h"

#define BRK_HELD_MAX	64	/* tokens one sandbox may hold */
#define BRK_INFLIGHT_MAX 32	/* async requests in flight per sandbox */
#define BRK_OUTQ_MAX	64	/* replies queued while the agent does not read */
#define BRK_HANDLES_MAX	64	/* mediated fds per sandbox */
#define BRK_RATE	20000	/* requests per second per sandbox (sustained) */
#define BRK_BURST	2000	/* ... and burst */
#define BRK_BATCH	32	/* packets read per wakeup, for fairness */
#define BRK_BAD_COST	16	/* a malformed packet costs this many requests of the rate */
#define BRK_SANDBOXES_MAX 4096
#define BRK_MINT_MAX	1024	/* tokens minted for one sandbox in its life: derive,
				 * request (human, session, auto) alike */
#define BRK_SESSION_MAX	16	/* approvals "for this session" one sandbox keeps */
#define BRK_BAD_MAX	4096	/* malformed packets before the channel is closed */
#define BRK_PENDING_MAX	4	/* elevation requests one sandbox may have waiting */
#define BRK_COAL_SLOTS	8	/* recent denials remembered for coalescing (budget.c) */
#define BRK_DISK_RESERVE (128 * 1024)	/* free bytes the state's disk must keep for a new sandbox */
#define BRK_CLOCK_JUMP_S 2	/* a wall-clock jump audited (s) */
#define BRK_ADMIN_MAX	256	/* idle admin connections in total */
#define BRK_ADMIN_PER_UID 32	/* ... and per peer uid */
/* An admin connection that controls a live sandbox (`run --connect`) is
 * counted as that sandbox, under these bounds, not as an idle connection:
 * a daemon runs as many sandboxes as its sandbox limit allows, while a
 * flood of connections that run nothing is still cut at the caps above.
 * Per uid half of them, so one administrator cannot take every slot. */
#define BRK_ADMIN_RUN_MAX BRK_SANDBOXES_MAX		/* run connections in total */
#define BRK_ADMIN_RUN_PER_UID (BRK_SANDBOXES_MAX / 2)	/* ... and per peer uid */
#define BRK_ACCEPT_BACKOFF_MAX_MS 1000	/* longest pause of the listener after a failed accept */
#define BRK_PATH_MAX	4096	/* a path the broker keeps (the kernel's PATH_MAX) */
#define BRK_STATE_FILE_MAX (BRK_PATH_MAX + 104)	/* STATE/name: a file in the state directory */
#define BRK_TIER_NAME_MAX 64	/* a tier's name as a sandbox keeps it */
#define BRK_RO_BINDS_MAX 32	/* --ro-bind options of one run */
#define BRK_SNDBUF_REPLIES 8	/* largest replies a channel's send buffer holds */
#define BRK_DETAIL_MAX	128	/* an audit detail's words around the names it quotes */

struct event;
struct cl;
struct cl_req;

/* A token a sandbox holds: decoded once, its signature verified once. */
struct brk_held {
	struct cap_token *tok;
	char *text;
	size_t text_len;
	bool sig_ok;
	uint64_t sig_epoch;	/* st_epoch() when verified */
	uint32_t in_ceiling;	/* bit i: caps[i] inside the ceiling (or requestable) */
	bool granted;		/* minted for this sandbox (not presented by it) */
	bool inst_ok;		/* elevated: granted to this very sandbox instance */
};

/* A file the broker keeps open for mediated io. */
struct brk_handle {
	int fd;
	bool used;
	bool write;
	uint8_t tid[CAP_ID_LEN];	/* token re-checked on every io op */
	uint32_t th;
};

/* A recent denial whose identical repeats are counted, not written
 * (budget.c). */
struct brk_coal {
	bool used;
	int reason;
	bool has_tid;
	uint8_t tid[CAP_ID_LEN];
	char *op, *resource, *detail;
	uint64_t count;			/* repeats since its last line */
	uint64_t first_ns, last_ns;	/* wall clock of the first and last of them */
	uint64_t first_mono, seen_mono;
};

/* Lines the audit log refused (its ring or reserve full, the disk full),
 * by kind: denials, allowed operations done, and other events.  Each is
 * counted instead, from first to last (wall clock), and one audit.unlogged
 * line of that kind says how many as soon as the log takes lines again
 * (budget.c), so the log never silently lacks a decision. */
enum { BRK_UNL_DENY, BRK_UNL_ALLOW, BRK_UNL_OTHER, BRK_UNL_KINDS };
struct brk_unlogged {
	uint64_t n[BRK_UNL_KINDS];
	uint64_t first_ns[BRK_UNL_KINDS], last_ns[BRK_UNL_KINDS];
};

struct brk_out;			/* a queued reply */
struct brk_proc;		/* a running proc.exec child */
struct brk_notify;		/* a sandbox's seccomp listener (notify.c) */
struct brk_hosts;		/* a sandbox's /etc/hosts (hosts.c) */
struct brk_fss;			/* a sandbox's file server (fs_served.h) */
struct brk_pool;		/* the warm pool (pool.c) */
struct fsrv_pool;		/* the file servers' threads (fs_served.c) */

/* A policy and the sandboxes still using it.  A reload (SIGHUP to `serve`)
 * makes a new one current; new sandboxes start under it, running ones keep
 * the one they started under, which is freed when the last of them ends. */
struct brk_pol {
	struct pol *pol;
	unsigned refs;			/* sandboxes using it */
	uint64_t gen;			/* 1 at start, +1 per reload */
};

struct brk_sbx {
	struct brk *b;
	struct brk_sbx *next;
	char id[CAP_AUD_MAX + 1];
	char *command;			/* argv joined: what the log and the approver show */
	char tier_name[BRK_TIER_NAME_MAX];
	enum sbx_tier stier;
	struct pol_inst *inst;		/* its tier, from pol */
	struct brk_pol *pol;		/* the policy it started under */
	char *workspace;		/* its real path (malloc'd: realpath); set at its creation */
	uint64_t started_at;
	uint64_t wall;			/* its wall-clock limit, seconds */
	uid_t owner;			/* who started it (admin peer or us) */

	int fd;				/* broker end of the socketpair */
	struct event *ev_read;
	struct event *ev_write;
	struct event *ev_rate;		/* re-enables reading after a rate stall */
	struct brk_out *outq, *outq_tail;
	size_t noutq;

	double bucket;			/* rate limiter */
	uint64_t bucket_ns;
	unsigned inflight;
	uint64_t nreq, nbad;

	double aud_bucket;		/* audit budget (budget.c): denials */
	double aud_bytes;		/* ... and bytes of log, allowed or denied */
	uint64_t aud_bucket_ns;
	uint64_t throttled_since;	/* mono ns; 0: not throttled */
	bool throttle_noted;		/* its "sandbox.throttled" line is written */
	bool close_noted;		/* its "sandbox.channel-closed" line is written */
	uint64_t dry_ns;		/* mono ns: a budget last ran dry */
	uint64_t calm_ns;		/* ... and how long it must not again to end the episode */
	uint64_t ndenied;
	uint64_t nbytes;		/* bytes of audit log it caused */
	struct brk_coal coal[BRK_COAL_SLOTS];
	struct brk_unlogged unlogged;	/* its lines the log refused, not yet said */

	struct brk_held held[BRK_HELD_MAX];
	size_t nheld;
	struct brk_handle handles[BRK_HANDLES_MAX];
	struct cap *session_caps[BRK_SESSION_MAX];	/* approvals "for this session" */
	uint64_t session_ttl[BRK_SESSION_MAX];
	/* ... and the tokens each has minted (CAP_ID_LEN bytes each, the
	 * human's approval first, the later grants its children): one of
	 * them revoked ends the approval, so that `capctl revoke` is not
	 * undone by the agent asking again (red team, fourth pass). */
	uint8_t *session_ids[BRK_SESSION_MAX];
	size_t session_nids[BRK_SESSION_MAX];
	size_t nsession;

	struct sbx_proc proc;		/* the agent's sandbox, if we spawned it */
	bool spawned;
	struct event *ev_status, *ev_exit;
	bool status_read;		/* the stub's setup report was read */
	bool report_exit;		/* pid 1 reports the agent's exit (brk_sbx_exit_report) */
	char *setup_why;		/* why its setup failed (malloc'd), or NULL */
	bool exited;
	int exit_code;
	void (*on_exit)(struct brk_sbx *, void *);
	void *on_exit_arg;
	struct brk_proc *procs;		/* its running proc.exec children */
	struct brk_notify *notify;	/* its mediated connect() (notify.c), or NULL */
	struct brk_hosts *hosts;	/* the names its tokens grant (hosts.c), or NULL */
	unsigned dns_conns;		/* its open resolver connections (dns.c) */
	struct brk_fss *fss;		/* its file server (fs_served.c), or NULL */
	uint64_t instance;		/* st_instance_begin: its approved elevations
					 * are recorded against it in the state */
	unsigned minted;		/* tokens minted for it (BRK_MINT_MAX) */
	struct brk_spawn *begun;	/* from brk_sbx_begin to brk_sbx_finish (sbx.c) */
	int refs;			/* async operations holding this struct */
	bool dead;			/* channel closed; freed when refs drop to 0 */
};

struct brk_dconn;

struct brk {
	struct event_base *base;
	struct brk_dconn *dconns;	/* every sandbox's resolver connections (dns.c) */
	struct pol *pol;		/* the current policy: cur->pol */
	struct brk_pol *cur;
	struct st *st;
	struct aud_log *aud;
	struct brk_unlogged unlogged;	/* lines of no sandbox (or of one ended)
					 * the log refused, not yet said */
	struct wire_dec *dec;
	uint8_t *rbuf;			/* one receive buffer, WIRE_REQ_MAX + 1 */
	uint8_t *sbuf;			/* one send buffer, WIRE_REPLY_MAX */
	struct brk_sbx *sbx;		/* live sandboxes */
	size_t nsbx;
	struct brk_opts opts;
	char state_dir[BRK_PATH_MAX];
	char state_real[BRK_PATH_MAX];		/* its canonical path: never served */
	char capcall_path[BRK_PATH_MAX];
	char pylib_dir[BRK_PATH_MAX];
	int admin_fd;
	struct event *ev_admin;
	char admin_path[BRK_PATH_MAX];		/* the admin socket's path */
	bool admin_bound;		/* we bound it (not inherited): we remove it */
	dev_t admin_dev;		/* ... if it is still ours at exit */
	ino_t admin_ino;
	bool admin_stale;		/* a stale socket was removed at start */
	int lock_fd;			/* STATE/broker.lock, flock'd for our life */
	struct event *ev_admin_retry;	/* re-arms the listener after a failed accept */
	unsigned admin_backoff_ms;	/* current backoff (0: none) */
	uint64_t accept_failures;	/* failed accepts, counted (capctl status) */
	uint64_t admin_refused;		/* connections refused over the caps */
	int spare_fd;			/* kept open so a refusal can still be sent */
	struct event *ev_tick;
	int wake_pipe[2];		/* worker threads -> loop */
	struct event *ev_wake;
	size_t jobs;			/* worker jobs whose done() has not run */
	struct brk_admin *admins;	/* admin connections */
	struct brk_pending *pending;	/* elevation requests awaiting a human */
	int tty_fd;			/* --approve tty */
	struct event *ev_tty;
	struct brk_pending *tty_current;
	/* The shown request went away without the terminal's answer: the one
	 * shown next ignores answers until tty_quiet_until (mono ns), since
	 * one typed then was meant for the one the human was reading. */
	bool tty_answering;		/* brk_tty_read is deciding */
	bool tty_switched;
	uint64_t tty_quiet_until;
	struct brk_hostaddr *hostaddr;	/* the host's own addresses (hostaddr.c) */
	struct brk_pool *pool;		/* pre-built proc.exec sandboxes (pool.c), or NULL */
	struct brk_reap *reaping;	/* stubs given up on, not yet reaped (reap.c) */
	struct brk_fss *fss_ending;	/* file servers of freed sandboxes not yet
					 * ended by their pool thread (fs_served.c) */
	struct fsrv_pool *fss_pool;	/* the threads serving every sandbox's served
					 * trees, made by the first (fs_served.c) */
	/* The calls up, set by brk_new, so that no file calls one above it
	 * (docs/architecture.md).  A channel had to close (chan.c):
	 * brk_sbx_close_channel. */
	void (*chan_closed)(struct brk_sbx *s, const char *why);
	/* A sandbox's token table changed (tokens.c tells; set to
	 * brk_fss_refresh by brk_new: its file server's grant snapshot). */
	void (*tokens_changed)(struct brk_sbx *s);
	/* The last reference to a dead sandbox went (brk_sbx_release):
	 * brk_sbx_free. */
	void (*sbx_free)(struct brk_sbx *s);
	/* An elevation request arrived (approval.c): brk_admin_notify, which
	 * tells the admin connections that watch. */
	void (*request_arrived)(struct brk *b, uint64_t rid);
	/* ... one of another broker of the cluster (fleet.c): brk_admin_notify_cl */
	void (*cl_request_arrived)(struct brk *b, const struct cl_req *r);
	void (*prompt_hook)(void *arg, bool open);	/* a tty prompt opens/closes */
	void *prompt_arg;
	/* A request now waits for an administrator (approval mode admin):
	 * brk_set_wait_hook's, so `run` can say where to decide it. */
	void (*wait_hook)(void *arg, const struct brk_wait *w);
	void *wait_arg;
	bool stopping;
	int exit_code;
	char dec_why[BRK_PATH_MAX + 512];		/* why the last brk_decide failed */
	uint64_t clock_wall, clock_mono;	/* the clocks at the last tick */
	/* The cluster (fleet.c), when --cluster or the policy names one. */
	struct cl *cl;
	struct event *ev_cl, *ev_cl_stale;
	char cl_name[BRK_PATH_MAX + 160];	/* host:state directory */
	uint64_t cl_fresh_ns;		/* monotonic: every change committed before it is applied */
	uint64_t cl_stale_ns;		/* the staleness bound */
	uint64_t cl_applied;		/* the last change applied */
	bool cl_stale_noted;		/* its "cluster.stale" line is written */
	bool cl_heads_ok;		/* our log holds the heads the cluster recorded: publish ours */
	bool cl_heads_asked;		/* ... being checked */
	struct adm_wait *rv_batch;	/* revokes committed in the cluster, to decide here */
	size_t rv_n;
	char cl_why[256];		/* why the link is down */
	uint64_t cl_sbx_sig;		/* the sandboxes last published (fleet.c) */
};

/* A reference on s: whatever keeps a sandbox across events (the read
 * loop, a DNS lookup, a proc.exec child, a waiting request, the connect
 * notifier) holds one, so s outlives its channel until the last is
 * released; the last release of a dead sandbox frees it (b->sbx_free). */
static inline void
brk_sbx_hold(struct brk_sbx *s)
{
	s->refs++;
}

static inline void
brk_sbx_release(struct brk_sbx *s)
{
	if (--s->refs == 0 && s->dead && (!s->spawned || s->exited))
		s->b->sbx_free(s);
}

#endif
