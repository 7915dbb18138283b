/*
 * capctl_int.h - what capctl's files share (not installed): the command
 * state, the output helpers and the admin-connection glue of capctl.c,
 * and one entry point per command group.
 *
 * Trust domain: an administrator's process.  Text that came from an agent
 * reaches the terminal only through ctl_text() or cb_text_esc() (the one
 * escaper, common/text.c), and --json output only through J() and
 * ctl_json() (the one JSON writer, cli/).
 */
#ifndef CB_CAPCTL_INT_H
#define CB_CAPCTL_INT_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "caps/caps.h"
#include "cli/cli.h"
#include "client/admin.h"
#include "common/common.h"
#include "state/state.h"
#include "wire/wire.h"

/* capctl's exit statuses are the admin client's (docs/capctl.md). */
enum {
	CTL_OK = CC_ADM_OK,
	CTL_FAIL = CC_ADM_FAIL,
	CTL_UNKNOWN = CC_ADM_UNKNOWN,
	CTL_PERM = CC_ADM_PERM,
	CTL_BADCAP = CC_ADM_BADCAP,
	CTL_POLICY = CC_ADM_POLICY,
	CTL_USAGE = CC_ADM_USAGE,
	CTL_UNAVAIL = CC_ADM_UNAVAIL,
	CTL_PROTO = CC_ADM_PROTO,
};

#define CTL_TIMEOUT_MS	CC_ADM_TIMEOUT_MS

struct ctl {
	const char *sock;	/* admin socket path, or NULL */
	const char *state;	/* --state DIR, or NULL */
	bool json;
	bool cluster;		/* --cluster: list and sandboxes of every broker of the cluster */
	bool json_done;		/* --json: a document is on stdout already */
	struct cc_adm *adm;	/* the admin connection (connected by ctl_connect) */
};

/* Per-command option parsing: --json is accepted after the command too. */
#define CTL_JSON_OPT { "json", no_argument, NULL, 'j' }
/* ... and --cluster after list and sandboxes. */
#define CTL_CLUSTER_OPT { "cluster", no_argument, NULL, 'C' }

/* ---- capctl.c: messages and output --------------------------------------- */

/* A message on stderr ("capctl: ..."), kept for --json errors. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error: the message, a pointer to --help; returns CTL_USAGE. */
int ctl_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* --json: print v (reference taken) as the one document. */
void ctl_json(struct ctl *c, json_t *v);
/* A string that may hold anything (an agent's reason, a path): JSON-safe. */
#define J(s) cli_json_str(s)
/* Text for a person, through the one escaper. */
void ctl_text(FILE *f, const char *s);
/* A request's reason through cb_text_show: escaped, at most
 * CB_TEXT_SHOW_MAX bytes, cut visibly. */
void ctl_reason(FILE *f, const char *s);
/* t as an ISO 8601 UTC time in buf ("-" for 0). */
const char *ctl_time(uint64_t t, char *buf, size_t len);
/* A positive whole number argument; CTL_OK or CTL_USAGE (said). */
int ctl_u64_arg(const char *s, const char *what, uint64_t *v);
/* For commands whose reply is just ok: "what id", or {"ok":true,"id":..}. */
int ctl_done(struct ctl *c, const char *what, const char *id);

/* ---- capctl.c: the admin connection (client/admin.c), messages said ------- */

/* Connect; quiet leaves "no broker there" to a caller with an offline
 * fallback.  CTL_OK or an exit status. */
int ctl_connect(struct ctl *c, bool quiet);
/* Begin a request of command cmd in rq (wire/admin.h). */
void ctl_begin(struct ctl *c, struct wire_adm_req *rq, enum wire_adm_cmd cmd);
/* Send rq and wait for its ok reply in *rp (wire/admin.h); a refusal is
 * reported (also as --json) and its exit status returned. */
int ctl_call(struct ctl *c, const struct wire_adm_req *rq, struct wire_adm_rep *rp);
/* Send rq without waiting (watch reads the reply among events). */
int ctl_send(struct ctl *c, const struct wire_adm_req *rq);
/* One message within timeout_ms (-1: no limit); see cc_adm_recv(). */
int ctl_recv(struct ctl *c, struct wire_msg *m, int timeout_ms, bool *timedout);

/* ---- the commands: each returns capctl's exit status ---------------------- */

/* capctl_tok.c: tokens and signing keys */
int ctl_issue(struct ctl *c, int argc, char **argv);
int ctl_revoke(struct ctl *c, int argc, char **argv);
int ctl_list(struct ctl *c, int argc, char **argv);
int ctl_keygen(struct ctl *c, int argc, char **argv);
int ctl_rotate(struct ctl *c, int argc, char **argv);
int ctl_retire(struct ctl *c, int argc, char **argv);

/* capctl_sbx.c: sandboxes and elevation requests */
int ctl_sandboxes(struct ctl *c, int argc, char **argv);
int ctl_kill(struct ctl *c, int argc, char **argv);
int ctl_pending(struct ctl *c, int argc, char **argv);
int ctl_decide(struct ctl *c, int argc, char **argv, bool approve);

/* An elevation request as the broker describes it (pending and watch). */
struct ctl_req {
	uint64_t rid, ttl, asked, expires;
	char sandbox[CAP_AUD_MAX + 1];
	char command[ST_TEXT_MAX + 1];
	char cap[CAP_STR_MAX + 1];
	char reason[ST_TEXT_MAX + 1];
	char state[16];
	char broker[256];	/* in a cluster: the broker holding the sandbox ("" if not said) */
};
void ctl_req_get(const struct wire_adm_elev *e, struct ctl_req *q);
/* The request as JSON, "event" first when given (new reference). */
json_t *ctl_req_json(const struct ctl_req *q, const char *event);

/* capctl_watch.c */
int ctl_watch(struct ctl *c, int argc, char **argv);

/* capctl_audit.c: audit, audit verify (online or offline) */
int ctl_audit(struct ctl *c, int argc, char **argv);

#endif
