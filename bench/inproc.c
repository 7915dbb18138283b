/*
 * inproc.c - in-process measurements that the end-to-end runs cannot
 * isolate: token signing and verification, the cached token check, the
 * pieces of the fs.read hot path one by one, revocation lookups with many
 * revoked tokens, and the state's memory with a million tokens.
 *
 * Trust domain: broker (it links the broker's libraries and calls them as
 * the broker does, on a private state directory).  Measurement only.
 *
 *   inproc tokens DIR REPS     sign / verify / cached check / hot-path pieces
 *   inproc opens DIR REPS      the system calls of one open, four ways (DIR/file)
 *   inproc revoke DIR          lookups with 1 k, 100 k and 1 M revoked tokens;
 *                              leaves DIR/revoked, a state with 1 M issued
 *                              tokens (bench.py starts `capbroker serve` on it)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sodium.h>

#include "bench/bench.h"
#include "broker/core.h"
#include "broker/tokens.h"

#define WS "/bench/ws"

static void
check(int r, const char *what)
{
	if (r != 0) {
		fprintf(stderr, "inproc: %s: %s\n", what, cb_strerror(r));
		exit(1);
	}
}

/* Resident set size of this process, from /proc/self/status. */
static double
rss_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lf", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* A broker with just what the token check needs, and one medium-tier
 * sandbox (no process) whose workspace is WS. */
struct rig {
	struct brk b;
	struct brk_sbx *s;
	struct cap *cap;
};

static void
rig_open(struct rig *g, const char *dir)
{
	const struct pol_tier *t;

	memset(g, 0, sizeof(*g));
	check(st_open(dir, &g->b.st), "st_open");
	check(pol_default(&g->b.pol), "pol_default");
	if (!(g->s = calloc(1, sizeof(*g->s))) || !(t = pol_tier_get(g->b.pol, "medium")))
		exit(1);
	g->s->b = &g->b;
	snprintf(g->s->id, sizeof(g->s->id), "bench");
	check(pol_tier_instantiate(t, WS, &g->s->inst), "pol_tier_instantiate");
	check(cap_parse("fs.read:" WS "/**", &g->cap), "cap_parse");
}

static char *
rig_sign(struct rig *g)
{
	struct st_token rec;
	char *text = NULL;
	uint64_t now = cb_now();

	check(brk_tok_sign(&g->b, &(struct brk_mint){ .aud = g->s->id, .caps = &g->cap, .ncaps = 1,
	    .nbf = now, .exp = now + 3600, .by = "bench" }, &text, &rec), "brk_tok_sign");
	free(rec.caps);
	return text;
}

/* Time the statement(s) over reps batches of n runs: ns per run per batch.
 * Variadic so that a body may contain commas. */
#define TIMED(name, reps, n, ...) do { \
	double v_[64] = { 0 }; \
	for (int r_ = 0; r_ < (reps); r_++) { \
		uint64_t t0_ = bn_now(); \
		for (long i_ = 0; i_ < (long)(n); i_++) { __VA_ARGS__; } \
		v_[r_] = (double)(bn_now() - t0_) / (double)(n); \
	} \
	bn_emit((name), "ns", v_, (size_t)(reps)); \
} while (0)

static int
cmd_tokens(const char *dir, int reps)
{
	struct rig g;
	enum { NT = 200 };
	char *texts[NT];
	struct cap_token *toks[NT];
	uint32_t th;
	struct brk_held *h;
	struct cap_req req = { .op = CAP_FS_READ, .path = WS "/src/main.c" };
	size_t ci;
	struct wire_dec *dec;
	struct wire_req q = { .id = 7, .op = WIRE_OP_FS_READ, .path = WS "/src/main.c",
		.has_th = true, .th = 0 }, dq;
	uint8_t qbuf[512], rbuf[512];
	size_t qlen, rlen;
	char root[CAP_STR_MAX + 1];
	struct aud_log *aud = NULL;
	struct aud_opts ao;
	char path[4200];
	volatile int sink = 0;

	if (reps > 64)
		reps = 64;
	rig_open(&g, dir);

	/* Issue: encode the claims, sign (Ed25519), base64 (no state write). */
	TIMED("tok.sign", reps, NT / 4, {
		char *t = rig_sign(&g);
		free(t);
	});
	for (int i = 0; i < NT; i++)
		texts[i] = rig_sign(&g);
	/* Cold verification: what a never-seen token costs. */
	TIMED("tok.decode", reps, NT, {
		struct cap_token *t = NULL;
		check(cap_token_decode(texts[i_], strlen(texts[i_]), &t), "decode");
		cap_token_free(t);
	});
	for (int i = 0; i < NT; i++)
		check(cap_token_decode(texts[i], strlen(texts[i]), &toks[i]), "decode");
	TIMED("tok.verify.cold", reps, NT / 4, {
		sink += cap_token_check_sig(st_keyring(g.b.st), toks[i_]);
	});
	/* Durable issue: sign, record in SQLite (synced), audit. */
	{
		struct aud_opts o;

		aud_opts_default(&o);
		snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
		o.sign = st_sign_audit;
		o.sign_arg = g.b.st;
		ao = o;
		check(aud_open(path, st_keyring(g.b.st), &ao, &aud), "aud_open");
		g.b.aud = aud;
	}
	TIMED("tok.mint", reps > 5 ? 5 : reps, 20, {
		char *t = NULL;
		uint8_t id[CAP_ID_LEN];
		uint64_t now = cb_now();
		check(brk_tok_mint(&g.b, &(struct brk_mint){ .aud = g.s->id, .caps = &g.cap,
		    .ncaps = 1, .nbf = now, .exp = now + 3600, .by = "bench" }, &t, id),
		    "brk_tok_mint");
		free(t);
	});
	/* The tokens must be known to the state for the check to pass. */
	for (int i = 0; i < NT; i++) {
		struct st_token rec;
		char *t = NULL;
		uint64_t now = cb_now();

		free(texts[i]);
		check(brk_tok_sign(&g.b, &(struct brk_mint){ .aud = g.s->id, .caps = &g.cap,
		    .ncaps = 1, .nbf = now, .exp = now + 3600, .by = "bench" }, &t, &rec), "sign");
		check(st_token_add(g.b.st, &rec), "st_token_add");
		free(rec.caps);
		texts[i] = t;
	}
	/* First use in the broker: add to the sandbox's table (decode), then the
	 * full check including the signature. */
	{
		double v[64] = { 0 };

		for (int r = 0; r < reps; r++) {
			uint64_t t0;

			brk_held_clear(g.s);
			t0 = bn_now();
			for (int i = 0; i < BRK_HELD_MAX; i++) {
				check(brk_held_add(g.s, texts[i], strlen(texts[i]), false, &th), "held_add");
				check(brk_tok_check(g.s, &g.s->held[th], &req, &ci), "first check");
			}
			v[r] = (double)(bn_now() - t0) / BRK_HELD_MAX;
		}
		bn_emit("tok.first_use", "ns", v, (size_t)reps);
	}
	/* Cached: the per-request check of a held, verified token. */
	h = &g.s->held[0];
	TIMED("tok.check.cached", reps, 200000, {
		sink += brk_tok_check(g.s, h, &req, &ci);
	});
	/* The pieces of one cached fs.read, in the order the broker runs them
	 * (chan.c, dispatch.c, ops_fs.c), without the system calls. */
	check(wire_dec_new(WIRE_REQ_MAX, &dec), "wire_dec_new");
	check(wire_req_encode(&q, qbuf, sizeof(qbuf), &qlen), "wire_req_encode");
	TIMED("hot.req_decode", reps, 100000, {
		sink += wire_req_decode(dec, qbuf, qlen, &dq);
	});
	TIMED("hot.path_check", reps, 200000, {
		sink += cap_path_check(q.path);
	});
	TIMED("hot.tok_select", reps, 200000, {
		struct brk_held *hh;
		sink += brk_tok_select(g.s, &q, &req, &hh, &ci);
	});
	TIMED("hot.path_root", reps, 200000, {
		sink += cap_path_root(h->tok->c.caps[0]->res, root, sizeof(root));
	});
	TIMED("hot.mono_clock", reps, 200000, {
		sink += (int)(cb_mono_ns() & 1);
	});
	{
		struct aud_rec ar = { .kind = AUD_OP, .decision = AUD_ALLOW, .sandbox = "sbx-1a2b3c4d",
			.op = "fs.read", .resource = q.path, .token_id = h->tok->c.id,
			.actor = "agent" };
		struct timespec gap = { 0, 20000000 };

		double v[64] = { 0 };

		/* Batches small enough for the ring, with a pause between them
		 * (untimed) in which the writer thread drains it. */
		for (int r = 0; r < reps; r++) {
			uint64_t t0 = bn_now();

			for (int i = 0; i < 2000; i++)
				sink += aud_append(aud, &ar);
			v[r] = (double)(bn_now() - t0) / 2000.0;
			nanosleep(&gap, NULL);
		}
		bn_emit("hot.audit_append", "ns", v, (size_t)reps);
	}
	{
		struct wire_reply rp = { .id = 7, .fd = true };

		TIMED("hot.reply_encode", reps, 200000, {
			sink += wire_reply_encode(&rp, rbuf, sizeof(rbuf), &rlen);
		});
	}
	for (int i = 0; i < NT; i++) {
		free(texts[i]);
		cap_token_free(toks[i]);
	}
	wire_dec_free(dec);
	brk_held_clear(g.s);
	pol_inst_free(g.s->inst);
	free(g.s);
	cap_free(g.cap);
	(void)aud_close(aud);
	pol_free(g.b.pol);
	st_close(g.b.st);
	return sink == 12345 ? 1 : 0;
}

/*
 * The system calls of one brokered open, without the rest of the broker:
 * what each way of opening a file beneath a pinned root costs (open and
 * close included).  plain: openat2 alone (the floor).  nonblock: openat2
 * with O_NONBLOCK, fstat, fcntl (the broker until 00c3ac4).  regular:
 * openat2(O_PATH), fstat, reopen through "/proc/self/fd/N" (never opens a
 * FIFO or device).  regular_procfd: the same reopen through a pinned
 * /proc/self/fd directory fd.
 */
static int
open_how2(int dirfd, const char *rel, uint64_t flags)
{
	struct open_how how = { .flags = flags | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };

	return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
}

static int
cmd_opens(const char *dir, int reps)
{
	int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int procfd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char p[64];
	struct stat st;
	int bad = 0;

	if (dirfd < 0 || procfd < 0 || reps > 64)
		return 1;
	TIMED("open.plain", reps, 20000, {
		int fd = open_how2(dirfd, "file", O_RDONLY | O_NOCTTY);
		bad |= fd < 0;
		close(fd);
	});
	TIMED("open.nonblock_fstat_fcntl", reps, 20000, {
		int fd = open_how2(dirfd, "file", O_RDONLY | O_NOCTTY | O_NONBLOCK);
		bad |= fd < 0 || fstat(fd, &st) != 0 || fcntl(fd, F_SETFL, 0) != 0;
		close(fd);
	});
	TIMED("open.regular_proc_self_fd", reps, 20000, {
		int pfd = open_how2(dirfd, "file", O_PATH), fd;
		bad |= pfd < 0 || fstat(pfd, &st) != 0;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
		fd = open(p, O_RDONLY | O_NOCTTY | O_CLOEXEC);
		bad |= fd < 0;
		close(pfd);
		close(fd);
	});
	TIMED("open.regular_pinned_procfd", reps, 20000, {
		int pfd = open_how2(dirfd, "file", O_PATH), fd;
		bad |= pfd < 0 || fstat(pfd, &st) != 0;
		snprintf(p, sizeof(p), "%d", pfd);
		fd = openat(procfd, p, O_RDONLY | O_NOCTTY | O_CLOEXEC);
		bad |= fd < 0;
		close(pfd);
		close(fd);
	});
	close(dirfd);
	close(procfd);
	return bad;
}

static struct st_token
mk(const uint8_t *id, const uint8_t *parent)
{
	struct st_token t;

	memset(&t, 0, sizeof(t));
	memcpy(t.id, id, CAP_ID_LEN);
	if (parent) {
		t.has_parent = true;
		memcpy(t.parent, parent, CAP_ID_LEN);
	}
	snprintf(t.sandbox, sizeof(t.sandbox), "sbx-bench");
	t.caps = "fs.read:" WS "/**";
	t.nbf = 1;
	t.exp = 4000000000u;
	t.uses_left = ST_UNLIMITED;
	t.issued_at = 1;
	snprintf(t.issued_by, sizeof(t.issued_by), "bench");
	return t;
}

/* ns per st_token_state on ids in a pseudo-random order (no cache pattern). */
static void
lookups(struct st *st, uint8_t (*ids)[CAP_ID_LEN], size_t n, const char *name, int want)
{
	double v[9];
	uint32_t x = 12345;
	int bad = 0;

	for (int r = 0; r < 9; r++) {
		uint64_t t0 = bn_now();

		for (int i = 0; i < 200000; i++) {
			x = x * 1664525u + 1013904223u;
			bad |= st_token_state(st, ids[x % n]) != want;
		}
		v[r] = (double)(bn_now() - t0) / 200000.0;
	}
	if (bad) {
		fprintf(stderr, "inproc: %s: wrong answer\n", name);
		exit(1);
	}
	bn_emit(name, "ns", v, 9);
}

/*
 * Revocation lookups.  Tokens are revoked two ways: each one revoked on
 * its own (st_revoke per token: a flag on its entry and one synced row),
 * and as children of one revoked root (found through the parent link).
 * Lookups are timed at 1 k, 100 k and 1 M revoked, on revoked and on live
 * ids.  Revoking 1 M tokens one by one costs a synced transaction each, so
 * the million individually revoked run only on tmpfs (fast fsync); the
 * state directory is under DIR.
 */
static int
cmd_revoke(const char *dir)
{
	static const size_t levels[] = { 1000, 100000, 1000000 };
	size_t total = levels[2], have = 0, nlive = 10000;
	uint8_t (*ids)[CAP_ID_LEN] = malloc(total * sizeof(*ids));
	uint8_t (*live)[CAP_ID_LEN] = malloc(nlive * sizeof(*live));
	uint8_t (*kids)[CAP_ID_LEN] = malloc(total * sizeof(*kids));
	struct st_token *t = malloc(100000 * sizeof(*t));
	char sub[4200], name[64];
	struct st *st = NULL;
	struct st_mem m;
	uint8_t root[CAP_ID_LEN];
	double rss0 = 0;

	if (!ids || !live || !kids || !t)
		exit(1);
	randombytes_buf(ids, total * sizeof(*ids));
	randombytes_buf(live, nlive * sizeof(*live));
	randombytes_buf(kids, total * sizeof(*kids));
	randombytes_buf(root, sizeof(root));

	/* 1. Independently revoked tokens, plus live ones to look up too. */
	snprintf(sub, sizeof(sub), "%s/revoked", dir);
	check(st_open(sub, &st), "st_open");
	for (size_t i = 0; i < nlive; i++)
		t[i] = mk(live[i], NULL);
	check(st_token_add_batch(st, t, nlive), "add live");
	for (size_t l = 0; l < 3; l++) {
		uint64_t t0 = bn_now();
		size_t start = have;

		while (have < levels[l]) {
			size_t k = levels[l] - have < 100000 ? levels[l] - have : 100000;

			for (size_t i = 0; i < k; i++)
				t[i] = mk(ids[have + i], NULL);
			check(st_token_add_batch(st, t, k), "add");
			for (size_t i = 0; i < k; i++)
				check(st_revoke(st, ids[have + i], 100, NULL), "st_revoke");
			have += k;
		}
		fprintf(stderr, "inproc: %zu revoked (+%zu in %.1f s)\n", have, have - start,
		    (double)(bn_now() - t0) / 1e9);
		/* The same 1000 revoked ids at every size: what a broker sees
		 * (the tokens in use are few), and what "flat" should mean. */
		snprintf(name, sizeof(name), "revoke.lookup.hot.%zu", levels[l]);
		lookups(st, ids, 1000, name, CB_EREVOKED);
		/* Every revoked id in random order: each lookup misses the
		 * caches and the TLB once the table outgrows them. */
		snprintf(name, sizeof(name), "revoke.lookup.random.%zu", levels[l]);
		lookups(st, ids, have, name, CB_EREVOKED);
		if (l == 2) {
			st_mem_usage(st, &m);
			bn_emit1("state.index_bytes_per_token", "bytes",
			    (double)m.bytes / (double)m.tokens);
			bn_emit1("revoke.st_revoke", "ns",
			    (double)(bn_now() - t0) / (double)(have - start));
		}
		snprintf(name, sizeof(name), "revoke.lookup.live.%zu", levels[l]);
		lookups(st, live, nlive, name, 0);
	}
	st_close(st);
	st = NULL;

	/* 2. N children of one revoked root: the cascade, found through the
	 * parent link.  Also the in-memory cost of a million tokens. */
	for (size_t l = 0; l < 3; l++) {
		snprintf(sub, sizeof(sub), "%s/tree%zu", dir, levels[l]);
		if (l == 2)
			rss0 = rss_bytes();
		check(st_open(sub, &st), "st_open tree");
		t[0] = mk(root, NULL);
		check(st_token_add_batch(st, t, 1), "add root");
		for (size_t done = 0; done < levels[l];) {
			size_t k = levels[l] - done < 100000 ? levels[l] - done : 100000;

			for (size_t i = 0; i < k; i++)
				t[i] = mk(kids[done + i], root);
			check(st_token_add_batch(st, t, k), "add children");
			done += k;
		}
		if (l == 2)
			bn_emit1("state.rss_1m_tokens", "bytes", rss_bytes() - rss0);
		check(st_revoke(st, root, 100, NULL), "revoke root");
		snprintf(name, sizeof(name), "revoke.lookup.child.hot.%zu", levels[l]);
		lookups(st, kids, 1000, name, CB_EREVOKED);
		snprintf(name, sizeof(name), "revoke.lookup.child.random.%zu", levels[l]);
		lookups(st, kids, levels[l], name, CB_EREVOKED);
		st_close(st);
	}
	free(ids);
	free(live);
	free(kids);
	free(t);
	return 0;
}

int
main(int argc, char **argv)
{
	if (sodium_init() < 0)
		return 1;
	if (argc == 4 && strcmp(argv[1], "tokens") == 0)
		return cmd_tokens(argv[2], atoi(argv[3]));
	if (argc == 3 && strcmp(argv[1], "revoke") == 0)
		return cmd_revoke(argv[2]);
	if (argc == 4 && strcmp(argv[1], "opens") == 0)
		return cmd_opens(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: inproc tokens DIR REPS | inproc revoke DIR | inproc opens DIR REPS\n");
	return 64;
}
