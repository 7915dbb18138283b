/*
 * admin.h - the admin <-> broker protocol: one typed request per command,
 * shared by the broker (broker/admin.c), capctl and `capbroker run
 * --connect`.  See docs/capctl.md, "Protocol".
 *
 * Requests are msgpack maps { id, cmd, ... }; the tables in admin.c say
 * which keys each command takes and which each reply carries, with their
 * types, so no side spells a key by hand.  Requests are decoded in the
 * broker from bytes an administrator's client sent (checked: an admin
 * connection may come from any process the admin group runs); replies and
 * events are decoded as strictly by the clients.
 */
#ifndef CB_WIRE_ADMIN_H
#define CB_WIRE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "wire/agent.h"
#include "wire/codec.h"

#define WIRE_ADM_BINDS_MAX	32	/* run: most read-only binds */
/* run: most --setenv (pairs) and most --unsetenv: SBX_ENV_MAX, which
 * wire/ cannot include; broker/admin.c asserts they agree. */
#define WIRE_ADM_ENV_MAX	64

enum wire_adm_cmd {
	WIRE_ADM_STATUS,
	WIRE_ADM_ISSUE,
	WIRE_ADM_REVOKE,
	WIRE_ADM_LIST,
	WIRE_ADM_SANDBOXES,
	WIRE_ADM_KILL,
	WIRE_ADM_PENDING,
	WIRE_ADM_APPROVE,
	WIRE_ADM_DENY,
	WIRE_ADM_WATCH,
	WIRE_ADM_ROTATE_KEY,
	WIRE_ADM_RETIRE_KEY,
	WIRE_ADM_AUDIT_VERIFY,
	WIRE_ADM_RUN,
	WIRE_ADM_COUNT
};

/* One request.  Each command reads only its own fields (the comments);
 * absent strings are NULL, absent numbers 0 unless a has_ flag says. */
struct wire_adm_req {
	uint64_t id;
	enum wire_adm_cmd cmd;
	const char *sandbox;		/* issue, list, kill, run: sandbox id */
	const char *caps[WIRE_CAPS_MAX];	/* issue */
	size_t ncaps;
	uint64_t ttl;			/* issue, approve, run: seconds */
	bool has_uses;
	uint64_t uses;			/* issue */
	const char *tid;		/* revoke: token id, hex */
	uint64_t offset;		/* list, pending: page start */
	bool has_rid;
	uint64_t rid;			/* approve, deny: request id */
	bool session;			/* approve: for the sandbox's lifetime */
	const char *reason;		/* approve, deny */
	const char *kid;		/* retire-key: key id, hex */
	const char *argv[WIRE_ARGV_MAX];	/* run */
	size_t argc;
	const char *tier, *workspace, *chdir;	/* run */
	uint64_t timeout;		/* run: seconds of wall clock */
	const char *grants[WIRE_CAPS_MAX];	/* run */
	size_t ngrants;
	const char *ro_binds[WIRE_ADM_BINDS_MAX];	/* run */
	size_t nro_binds;
	const char *setenv[2 * WIRE_ADM_ENV_MAX];	/* run: NAME, VALUE, ... */
	size_t nsetenv;			/* strings, not pairs */
	const char *unsetenv[WIRE_ADM_ENV_MAX];	/* run */
	size_t nunsetenv;
	bool pty;			/* run: the task wants a terminal */
	bool serve_workspace;		/* run: the workspace was named (serve it) */
	bool cluster;			/* list, sandboxes: of every broker of the cluster;
					 * audit-verify: also against the cluster's record */
	bool flush;			/* status: reply once every audit record appended
					 * so far is on disk (capctl audit) */
	const char *why;		/* after a failed decode: what was wrong, or NULL */
};

const char *wire_adm_cmd_name(enum wire_adm_cmd cmd);

/* Encode r (only the fields its command takes).  0, CB_ETOOBIG, CB_EINVAL. */
int wire_adm_encode(const struct wire_adm_req *r, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;

/* Strictly decode a request: id and cmd first (r->id is set once read, so
 * a refusal can name the message), then only the keys the command takes,
 * each of its type.  Errors: CB_EPROTO (malformed, a wrong type or a key
 * the command does not take), CB_EUNKNOWNOP, CB_ETOOBIG (input too large),
 * or the command's own code for a list over its bound; r->why says what
 * was wrong (in the dec's arena) when it can. */
int wire_adm_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_adm_req *r) CB_WARN_UNUSED;

/* ---- replies and events ---------------------------------------------------
 * A reply is a map { id, ok, [err, name, reason], the command's own keys }:
 * ok false carries the refusal's code, its name and a sentence.  Each
 * command's keys are one table in admin.c (their types, which an ok reply
 * must carry); a refusal may carry them too (audit-verify's does) or not.
 * Events ({ event, ... }, no id) reach connections that watch, and the
 * exit of a `run --connect` sandbox.  Strings and lists of a decoded reply
 * live in the dec's arena: valid until its next decode. */

#define WIRE_ADM_PAGE_MAX	1024	/* most entries one list reply may carry */

/* One token of a list reply. */
struct wire_adm_token {
	const char *id;			/* token id, hex */
	const char *parent;		/* the parent's id, or NULL */
	const char *sandbox, *caps, *by;
	uint64_t nbf, exp;
	bool has_uses;
	uint64_t uses;			/* uses left, when limited */
	bool revoked, elevated;
	const char *broker;		/* a --cluster view: the broker that minted it */
};

/* One live sandbox of a sandboxes reply. */
struct wire_adm_sbx {
	const char *id, *tier, *command, *workspace;
	uint64_t started, pid, tokens, requests, owner;
	const char *broker;		/* a --cluster view: the broker running it */
};
/* tokens, requests in a --cluster view: the broker running the sandbox
 * did not publish them (a broker of an earlier version) */
#define WIRE_ADM_COUNT_UNKNOWN	UINT64_MAX

/* One elevation request: an entry of a pending reply, a request event. */
struct wire_adm_elev {
	uint64_t rid;
	const char *sandbox, *command, *cap, *reason, *state;
	uint64_t ttl, asked, expires;
	const char *broker;		/* in a cluster: the broker holding the sandbox */
};

/* One broker's audit log as the cluster recorded it (audit-verify
 * --cluster): its last checkpoint head. */
struct wire_adm_head {
	const char *broker, *log;	/* name in the cluster; log id, hex */
	uint64_t seq;			/* the checkpoint line's seq */
	uint64_t age_ms;		/* since the database recorded it */
	bool live;			/* that broker reports within the staleness bound */
};

/* One reply.  cmd is not sent: it says which command's keys to put or
 * expect (WIRE_ADM_COUNT: none, the envelope of a refusal alone).  Each
 * command reads only its own fields (the comments). */
struct wire_adm_rep {
	uint64_t id;
	enum wire_adm_cmd cmd;
	int err;			/* 0: ok; else the refusal's CB_E* code */
	const char *name;		/* a refusal: cb_errname(err) (decoded only) */
	const char *reason;		/* a refusal: the sentence (NULL: cb_strerror) */
	const char *state, *policy;	/* status */
	uint64_t pid, sandboxes, audit_lines, accept_failures, admin_refused;	/* status */
	bool audit_healthy;		/* status */
	const char *cluster;		/* status, in a cluster: this broker's name there */
	bool cluster_fresh;		/* ... caught up within the staleness bound */
	bool has_cluster;		/* ... (cluster_applied is set) */
	uint64_t cluster_applied;	/* ... the last change applied */
	const char *token, *tid;	/* issue */
	uint64_t exp;			/* issue */
	uint64_t count;			/* revoke: tokens revoked */
	const char *unconfirmed;	/* revoke, in a cluster: live brokers that did not
					 * confirm within the staleness bound, or NULL */
	const struct wire_adm_token *tokens;	/* list */
	size_t ntokens;
	const struct wire_adm_sbx *sbxs;	/* sandboxes */
	size_t nsbxs;
	const struct wire_adm_elev *requests;	/* pending */
	size_t nrequests;
	bool more;			/* list, pending: another page follows */
	const char *kid;		/* rotate-key: the new key's id, hex */
	bool intact;			/* audit-verify: ... */
	const char *problem, *what, *path;
	uint64_t line, lines, checkpoints, unsealed;
	bool checked_cluster;		/* audit-verify --cluster: ... */
	bool cluster_intact;		/* the log holds the head the cluster recorded */
	const char *cluster_problem;	/* "" or what is wrong (aud_problem_name's words) */
	const char *cluster_what;	/* a sentence on that check */
	const struct wire_adm_head *heads;	/* every broker's recorded heads */
	size_t nheads;
	const char *sandbox;		/* run: the sandbox's id */
	bool pty;			/* run: the stdio is a pty (its third fd a copy) */
};

enum wire_adm_ev {
	WIRE_ADM_EV_REQUEST,		/* an elevation request arrived (watchers) */
	WIRE_ADM_EV_EXIT,		/* the sandbox this connection runs ended */
	WIRE_ADM_EV_COUNT
};

struct wire_adm_event {
	enum wire_adm_ev kind;
	struct wire_adm_elev req;	/* request */
	int64_t status;			/* exit: the agent's exit status */
	const char *reason;		/* exit: why it could not be set up, or NULL */
};

/*
 * Encode a reply as it is built, for a broker that fills a list from a
 * walk: wire_adm_rep_begin() puts the envelope and r's keys up to its list
 * (if its command has one) and opens the list; each entry goes in with
 * wire_adm_token_put(), wire_adm_sbx_put(), wire_adm_elev_put() or
 * wire_adm_head_put(); then
 * wire_adm_rep_end() closes the list and puts the keys after it (r->more,
 * read only now) and closes the map.  Then wire_enc_finish().
 */
void wire_adm_rep_begin(struct wire_enc *e, const struct wire_adm_rep *r);
void wire_adm_token_put(struct wire_enc *e, const struct wire_adm_token *t);
void wire_adm_sbx_put(struct wire_enc *e, const struct wire_adm_sbx *s);
void wire_adm_elev_put(struct wire_enc *e, const struct wire_adm_elev *q);
void wire_adm_head_put(struct wire_enc *e, const struct wire_adm_head *h);
void wire_adm_rep_end(struct wire_enc *e, const struct wire_adm_rep *r);
/* All at once, the lists from r's arrays.  0, CB_ETOOBIG, CB_EINVAL. */
int wire_adm_rep_encode(const struct wire_adm_rep *r, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;

/* Is m a reply (0, *id set) or an event (CB_ENOENT)?  CB_EPROTO if neither. */
int wire_adm_msg_id(const struct wire_msg *m, uint64_t *id) CB_WARN_UNUSED;

/* Strictly read m as the reply to a command cmd: the envelope, then only
 * the keys cmd's reply takes, each of its type; an ok reply must carry
 * every key its command always sends, a list at most WIRE_ADM_PAGE_MAX
 * entries, each complete.  0, CB_EPROTO, CB_ETOOBIG (the dec's arena is
 * full), CB_EINVAL (cmd out of range). */
int wire_adm_rep_get(const struct wire_msg *m, enum wire_adm_cmd cmd, struct wire_adm_rep *r) CB_WARN_UNUSED;
/* The same from bytes (wire_decode first). */
int wire_adm_rep_decode(struct wire_dec *d, const uint8_t *buf, size_t len, enum wire_adm_cmd cmd,
    struct wire_adm_rep *r) CB_WARN_UNUSED;

/* Events, the same way.  0, CB_ETOOBIG, CB_EINVAL; CB_EPROTO. */
int wire_adm_event_encode(const struct wire_adm_event *ev, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;
int wire_adm_event_get(const struct wire_msg *m, struct wire_adm_event *ev) CB_WARN_UNUSED;
int wire_adm_event_decode(struct wire_dec *d, const uint8_t *buf, size_t len,
    struct wire_adm_event *ev) CB_WARN_UNUSED;

#endif
