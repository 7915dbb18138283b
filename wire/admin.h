/*
 * admin.h - the admin <-> broker protocol: one typed request per command,
 * shared by the broker (broker/admin.c), capctl and `capbroker run
 * --connect`.  See docs/admin.md.
 *
 * Requests are msgpack maps { id, cmd, ... }; the table in admin.c says
 * which keys each command takes and their types, so no side spells a key by
 * hand.  Requests are decoded in the broker from bytes an administrator's
 * client sent (checked: an admin connection may come from any process the
 * admin group runs); replies are built and read with the wire/codec.h
 * primitives.
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

/* The envelope every reply starts with: { id, ok, [err, name, reason] }.
 * Leaves the map open for the command's own fields; close it with
 * wire_map_end() before wire_enc_finish(). */
void wire_adm_reply_begin(struct wire_enc *e, uint64_t id, int err, const char *reason);

#endif
