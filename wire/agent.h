/*
 * agent.h - the agent <-> broker protocol: requests (agent -> broker) and
 * replies (broker -> agent), each a msgpack map with short string keys.
 * See docs/protocol.md.
 *
 * Requests are decoded in the broker from bytes an agent sent (hostile):
 * each op takes a fixed set of keys and refuses any other.  Replies are
 * decoded in clients from bytes the broker sent.
 */
#ifndef CB_WIRE_AGENT_H
#define CB_WIRE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "wire/codec.h"

#define WIRE_REQ_MAX	(64 * 1024)	/* largest agent request packet */
#define WIRE_REPLY_MAX	(200 * 1024)	/* largest reply packet */
#define WIRE_DATA_MAX	(56 * 1024)	/* inline bytes in one write/read */
#define WIRE_OUT_MAX	(64 * 1024)	/* proc.exec output kept per stream */
/* proc.exec's argv (and a run request's): the program and its arguments.
 * The sandbox's own SBX_ARGV_MAX (broker/ops_proc.c asserts they agree):
 * every command the decoder accepts fits the launcher and a pooled
 * sandbox's hand-over; the request's 64 KiB bounds its bytes. */
#define WIRE_ARGV_MAX	1024
/* Capabilities in one derive request: CAP_MAX_CAPS, which wire/ cannot
 * include (caps/ is built on wire/); broker/ops_tok.c asserts they agree. */
#define WIRE_CAPS_MAX	32

/* ---- agent requests --------------------------------------------------- */

enum wire_op {
	WIRE_OP_PING,
	WIRE_OP_FS_READ,	/* open read-only; fd (or handle if MEDIATED) */
	WIRE_OP_FS_WRITE,	/* open writable; fd/handle, or write `data` */
	WIRE_OP_FS_LIST,
	WIRE_OP_FS_STAT,
	WIRE_OP_FS_MKDIR,
	WIRE_OP_FS_DELETE,
	WIRE_OP_FS_RENAME,
	WIRE_OP_NET_CONNECT,
	WIRE_OP_PROC_EXEC,
	WIRE_OP_REQUEST,	/* ask for elevation */
	WIRE_OP_TOKENS,		/* list the sandbox's tokens */
	WIRE_OP_TOKEN_ADD,	/* present a token once, get a handle */
	WIRE_OP_DERIVE,		/* mint a narrower child token */
	WIRE_OP_IO_READ,	/* mediated read on a handle */
	WIRE_OP_IO_WRITE,	/* mediated write on a handle */
	WIRE_OP_IO_CLOSE,
	WIRE_OP_COUNT
};

#define WIRE_F_CREATE	0x01u
#define WIRE_F_TRUNC	0x02u
#define WIRE_F_APPEND	0x04u
#define WIRE_F_EXCL	0x08u
#define WIRE_F_MEDIATED	0x10u	/* broker keeps the fd; io.* go through it */
#define WIRE_F_ALL	0x1fu

const char *wire_op_name(enum wire_op op);

struct wire_req {
	uint32_t id;
	enum wire_op op;
	const char *tok;	/* token text presented, or NULL */
	bool has_th;
	uint32_t th;		/* token handle from tokens/token.add */
	const char *path;
	const char *path2;	/* rename target */
	uint32_t flags;		/* WIRE_F_* */
	uint32_t mode;		/* create mode, masked to 0777 by the broker */
	bool has_data;
	const uint8_t *data;
	size_t data_len;
	const char *host;
	uint32_t port;
	const char *argv[WIRE_ARGV_MAX];
	size_t argc;
	const char *cap;	/* request */
	const char *caps[WIRE_CAPS_MAX];	/* derive */
	size_t ncaps;
	uint64_t ttl;
	bool has_uses;
	uint32_t uses;
	const char *reason;
	const char *aud;	/* derive: audience of the child */
	uint32_t h;		/* io.*: handle */
	uint32_t len;		/* io.read: bytes wanted */
	uint32_t timeout_ms;	/* net.connect, proc.exec */
	const char *why;	/* after a failed decode: what was wrong, or NULL */
};

/* Strictly decode an agent request: only the keys its op takes (see the
 * table in agent.c and docs/protocol.md), each with its type, strings
 * without NUL.  Errors: CB_EPROTO, CB_ETOOBIG, CB_EUNKNOWNOP; id is set
 * once it has been read, so a refusal can name the call, and why may say
 * what was wrong (in the dec's arena). */
int wire_req_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_req *out) CB_WARN_UNUSED;
int wire_req_encode(const struct wire_req *r, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;

/* ---- replies (broker -> agent) ----------------------------------------- */

struct wire_entry {
	const char *name;
	char type;		/* f file, d dir, l symlink, o other */
};

struct wire_tokinfo {
	uint32_t th;
	const char *id;		/* hex */
	const char *caps;	/* space-separated capability texts */
	uint64_t exp;
	bool has_uses;
	uint32_t uses;
	bool elevated;
	int state;		/* 0 usable now, else why not (CB_EEXPIRED, CB_EREVOKED...) */
};

struct wire_reply {
	uint32_t id;
	int err;		/* 0 or CB_E* */
	const char *reason;	/* why, on error */
	bool fd;		/* an fd is attached with SCM_RIGHTS */
	bool has_data;
	const uint8_t *data;
	size_t data_len;
	const struct wire_entry *entries;
	size_t nentries;
	bool trunc;		/* entries or output truncated */
	bool has_stat;
	uint64_t stat_size, stat_mtime;
	uint32_t stat_mode;
	char stat_type;
	bool has_status;
	int32_t status;
	const uint8_t *out;
	size_t out_len;
	const uint8_t *errout;
	size_t errout_len;
	const char *token;	/* new token text (derive, approved request) */
	const char *tid;	/* its id (hex) */
	bool has_th;
	uint32_t th;
	const char *rid;	/* elevation request id */
	const struct wire_tokinfo *tokens;
	size_t ntokens;
	bool has_h;
	uint32_t h;
	bool has_n;
	uint64_t n;
};

int wire_reply_encode(const struct wire_reply *r, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;
/* Entries and token lists are placed in the dec's arena. */
int wire_reply_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_reply *out) CB_WARN_UNUSED;

#endif
