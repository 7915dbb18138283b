/*
 * capclient.h - the C client library: an agent's calls to its broker.
 *
 * Runs inside the sandbox, in the agent's process (or in capcall, which is
 * the agent when the low tier forbids fork and exec).  It never forks, execs
 * or opens anything but the broker channel it is given; everything the agent
 * may touch comes back from the broker as a result or a file descriptor.
 *
 * The channel is the agent's end of a SOCK_SEQPACKET socketpair, named by
 * the CAPBROKER_FD environment variable.  One msgpack map per packet, all
 * encoding and decoding through wire/wire.h (see docs/protocol.md).
 *
 * Conventions (as everywhere in capbroker): every fallible function returns
 * 0 or a negative CB_E* code from common/common.h.  When the broker refused
 * or failed an operation, the code is the broker's (CB_ENOTCOVERED,
 * CB_EDENIED, CB_ENOENT...) and cc_last_reason() gives its sentence.  When
 * the channel itself failed (EOF, a malformed, oversized or unexpected
 * reply), the code is CB_ECLOSED, CB_EPROTO, CB_ETOOBIG or CB_EIO,
 * cc_is_broken() becomes true and every later call fails with CB_ECLOSED.
 *
 * File descriptors returned by the library belong to the caller and carry
 * FD_CLOEXEC.  Result structures are single allocations freed by their
 * *_free() function (which accepts NULL).
 *
 * A connection is not thread-safe; use one per thread, or lock around it.
 */
#ifndef CB_CAPCLIENT_H
#define CB_CAPCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define CC_ENV_FD	"CAPBROKER_FD"
#define CC_MAX_INFLIGHT	64	/* requests one connection may have in flight */
/* How long a call waits for its reply before it fails with CB_ETIMEDOUT
 * (capcall exits 75): a stopped or wedged broker never hangs its agents.
 * An elevation request waits for a human, so longer; net.connect and
 * proc.exec wait their own timeout plus the default.  CAPBROKER_TIMEOUT
 * (seconds) changes the default for the process. */
#define CC_TIMEOUT_MS		60000
#define CC_TIMEOUT_REQUEST_MS	(30 * 60 * 1000)
#define CC_ENV_TIMEOUT		"CAPBROKER_TIMEOUT"

/* fs.write flags (the protocol's values). */
#define CC_F_CREATE	0x01u
#define CC_F_TRUNC	0x02u
#define CC_F_APPEND	0x04u
#define CC_F_EXCL	0x08u

struct cc_conn;

/* ---- connection ------------------------------------------------------- */

/*
 * Connect through the fd named by $CAPBROKER_FD.  The fd is duplicated
 * (close-on-exec), so cc_close() leaves the inherited one for capcall or a
 * later connection.  CB_ENOENT when the variable is unset, CB_EINVAL when it
 * is not a decimal fd of a SOCK_SEQPACKET socket, CB_ENOMEM.
 */
int cc_open_env(struct cc_conn **out) CB_WARN_UNUSED;

/* Connect through fd, which the connection owns from now on (closed by
 * cc_close(), and on failure here).  Same errors as cc_open_env(). */
int cc_open_fd(int fd, struct cc_conn **out) CB_WARN_UNUSED;

/* Close the channel and every fd of replies never collected. */
void cc_close(struct cc_conn *c);

/* Set the reply timeouts of c in milliseconds (0: wait without limit):
 * ms for every call, request_ms for an elevation request. */
void cc_set_timeout(struct cc_conn *c, unsigned ms, unsigned request_ms);

/* The broker's sentence for the last failed call ("" if none), or a
 * description of the channel failure.  Valid until the next call on c. */
const char *cc_last_reason(const struct cc_conn *c);

/* The last call's code (0 or CB_E*). */
int cc_last_error(const struct cc_conn *c);

/* True once the channel failed; the connection is then useless. */
bool cc_is_broken(const struct cc_conn *c);

/* ---- token presentation -------------------------------------------------- */

/*
 * Which token later requests present: by default none, and the broker picks
 * the first token the sandbox holds that covers each request.
 * cc_token_use() presents the given token text (copied; NULL returns to the
 * default); cc_token_use_handle() presents a held token by handle (from
 * cc_tokens(), cc_token_add() or an approved cc_request()).
 */
int cc_token_use(struct cc_conn *c, const char *token) CB_WARN_UNUSED;
void cc_token_use_handle(struct cc_conn *c, uint32_t th);

/* Hand the broker a token once; it keeps it for this sandbox and returns a
 * handle for cc_token_use_handle(). */
int cc_token_add(struct cc_conn *c, const char *token, uint32_t *th) CB_WARN_UNUSED;

struct cc_tokinfo {
	uint32_t th;		/* handle */
	const char *id;		/* token id, hex */
	const char *caps;	/* space-separated capabilities */
	uint64_t exp;		/* expiry, seconds since the epoch */
	bool has_uses;
	uint32_t uses;		/* uses left */
	bool elevated;		/* minted by an approved request */
	int state;		/* 0 usable now; else why not: CB_EEXPIRED, CB_ENOTYET,
				 * CB_EREVOKED, CB_ESPENT, ... (the broker's check) */
};

struct cc_toklist {
	size_t n;
	struct cc_tokinfo *toks;
};

/* The tokens this sandbox holds.  *out freed with cc_toklist_free(). */
int cc_tokens(struct cc_conn *c, struct cc_toklist **out) CB_WARN_UNUSED;
void cc_toklist_free(struct cc_toklist *l);

/* A token minted for the sandbox: by derive or by an approved request. */
struct cc_grant {
	const char *token;	/* token text */
	const char *tid;	/* its id, hex ("" if the broker sent none) */
	bool has_th;
	uint32_t th;		/* handle, when the sandbox holds it */
};
void cc_grant_free(struct cc_grant *g);

struct cc_derive {
	const char *const *caps;	/* the narrower capabilities */
	size_t ncaps;
	uint64_t ttl;			/* seconds; 0: the parent's expiry */
	bool has_uses;
	uint32_t uses;
	const char *aud;		/* sandbox id of the child, or NULL */
};

/* Mint a child of the presented token (cc_token_use*) that cannot exceed
 * it.  CB_ENARROW if it would.  *out freed with cc_grant_free(). */
int cc_token_derive(struct cc_conn *c, const struct cc_derive *d,
    struct cc_grant **out) CB_WARN_UNUSED;

/*
 * Ask a human for time-limited elevation to capability cap.  Blocks until
 * the request is decided: 0 and the new token (held by the sandbox from now
 * on), or CB_EDENIED, CB_EEXPIREDREQ, CB_EPOLICY (not requestable).
 */
int cc_request(struct cc_conn *c, const char *cap, uint64_t ttl, const char *reason,
    struct cc_grant **out) CB_WARN_UNUSED;

/* ---- operations ------------------------------------------------------------ */

int cc_ping(struct cc_conn *c) CB_WARN_UNUSED;

/* Open path read-only; *fd is the broker's fd (caller closes it). */
int cc_fs_read(struct cc_conn *c, const char *path, int *fd) CB_WARN_UNUSED;

/* Open path for writing with CC_F_* flags and create mode; *fd writable. */
int cc_fs_write(struct cc_conn *c, const char *path, unsigned flags, unsigned mode,
    int *fd) CB_WARN_UNUSED;

/* Have the broker write len bytes (at most CC_DATA_MAX) to path; *n is what
 * it wrote (n may be NULL).  CB_ETOOBIG above the limit. */
#define CC_DATA_MAX	(56 * 1024)
int cc_fs_write_data(struct cc_conn *c, const char *path, unsigned flags, unsigned mode,
    const void *data, size_t len, size_t *n) CB_WARN_UNUSED;

/*
 * Mediated I/O: the broker keeps the file open and the agent reads or writes
 * through it by handle (for agents that may not receive fds, or when every
 * byte should pass the broker).  cc_io_read() with *got == 0 means EOF;
 * each call moves at most CC_DATA_MAX bytes.
 */
int cc_fs_read_handle(struct cc_conn *c, const char *path, uint32_t *h) CB_WARN_UNUSED;
int cc_fs_write_handle(struct cc_conn *c, const char *path, unsigned flags, unsigned mode,
    uint32_t *h) CB_WARN_UNUSED;
int cc_io_read(struct cc_conn *c, uint32_t h, void *buf, size_t len, size_t *got) CB_WARN_UNUSED;
int cc_io_write(struct cc_conn *c, uint32_t h, const void *buf, size_t len, size_t *n) CB_WARN_UNUSED;
int cc_io_close(struct cc_conn *c, uint32_t h) CB_WARN_UNUSED;

struct cc_dirent {
	const char *name;
	char type;		/* 'f' file, 'd' dir, 'l' symlink, 'o' other */
};

struct cc_dir {
	size_t n;
	bool trunc;		/* the broker cut the listing short */
	struct cc_dirent *ents;
};

/* List a directory.  *out freed with cc_dir_free(). */
int cc_fs_list(struct cc_conn *c, const char *path, struct cc_dir **out) CB_WARN_UNUSED;
void cc_dir_free(struct cc_dir *d);

struct cc_stat {
	uint64_t size;
	uint64_t mtime;		/* seconds since the epoch */
	uint32_t mode;		/* permission bits */
	char type;		/* 'f' 'd' 'l' 'o' */
};

int cc_fs_stat(struct cc_conn *c, const char *path, struct cc_stat *st) CB_WARN_UNUSED;
/* mode 0: the broker's default. */
int cc_fs_mkdir(struct cc_conn *c, const char *path, unsigned mode) CB_WARN_UNUSED;
int cc_fs_delete(struct cc_conn *c, const char *path) CB_WARN_UNUSED;
int cc_fs_rename(struct cc_conn *c, const char *from, const char *to) CB_WARN_UNUSED;

/* Connect to host:port over TCP (the broker resolves and connects);
 * *fd is the connected socket.  timeout_ms 0: the broker's default. */
int cc_net_connect(struct cc_conn *c, const char *host, uint16_t port, unsigned timeout_ms,
    int *fd) CB_WARN_UNUSED;

struct cc_exec {
	int32_t status;		/* exit status; 128+N if killed by signal N */
	bool trunc;		/* output cut at the broker's limit */
	const uint8_t *out;	/* NUL-terminated for convenience */
	size_t out_len;
	const uint8_t *err;
	size_t err_len;
};

/* Run argv (NULL-terminated, argv[0] an absolute path) in a sandbox of its
 * own.  timeout_ms 0: the broker's default.  *out freed with cc_exec_free(). */
int cc_proc_exec(struct cc_conn *c, const char *const *argv, unsigned timeout_ms,
    struct cc_exec **out) CB_WARN_UNUSED;
/* The same, with len bytes (at most CC_DATA_MAX) as the program's stdin
 * (which then reaches EOF).  CB_ETOOBIG above the limit. */
int cc_proc_exec_in(struct cc_conn *c, const char *const *argv, unsigned timeout_ms,
    const void *in, size_t len, struct cc_exec **out) CB_WARN_UNUSED;
void cc_exec_free(struct cc_exec *x);

/* ---- low level: several requests in flight ---------------------------------- */

/*
 * cc_send() assigns r->id, adds the presented token (unless r carries tok or
 * th already), sends r and returns the id.  cc_recv() waits for the reply to
 * that id; replies to other ids that arrive meanwhile are kept for their own
 * cc_recv().  cc_recv() returns 0 when a reply arrived, whatever it says
 * (rep->err is the broker's code), and a channel error otherwise.  *rep
 * points into the connection and is valid until the next call on c; *fd is
 * the attached fd or -1 (fd may be NULL: an attached fd is then closed).
 * cc_discard() forgets an id: its reply is dropped (and its fd closed).
 */
struct wire_req;
struct wire_reply;
int cc_send(struct cc_conn *c, struct wire_req *r, uint32_t *id) CB_WARN_UNUSED;
int cc_recv(struct cc_conn *c, uint32_t id, struct wire_reply *rep, int *fd) CB_WARN_UNUSED;
void cc_discard(struct cc_conn *c, uint32_t id);

/*
 * For an event loop with requests in flight (an elevation request waiting
 * for a human, say): cc_fd() is the channel to poll() for input; cc_collect()
 * reads every reply already waiting, without blocking, and keeps each for
 * its own cc_recv() (0 also when none was waiting, else a channel error);
 * cc_arrived() is true when the reply to id is kept, so that cc_recv(id)
 * returns at once.  Replies also arrive while cc_recv() waits for another.
 */
int cc_fd(const struct cc_conn *c);
int cc_collect(struct cc_conn *c) CB_WARN_UNUSED;
bool cc_arrived(const struct cc_conn *c, uint32_t id);

#endif
