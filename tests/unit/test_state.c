/*
 * test_state.c - durable state: first key, rotation and retirement, token
 * records, revocation cascade, use limits, elevation requests and their
 * expiry, the audit head, and persistence across a SIGKILLed process.
 * Test code (trusted); works in a private temporary directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "caps/caps.h"
#include "state/schema.h"
#include "state/state.h"
#include "tests/tap.h"

static char dir[] = "/tmp/test_state.XXXXXX";

static char *
sub(const char *name)
{
	static char buf[4][256];
	static int n;
	char *p = buf[n++ % 4];

	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

static struct st_token
tok(uint8_t idbyte, int parentbyte, uint32_t uses)
{
	struct st_token t;

	memset(&t, 0, sizeof(t));
	memset(t.id, idbyte, CAP_ID_LEN);
	if (parentbyte >= 0) {
		t.has_parent = true;
		memset(t.parent, parentbyte, CAP_ID_LEN);
	}
	snprintf(t.sandbox, sizeof(t.sandbox), "sb-%u", idbyte);
	t.caps = "fs.read:/work/**\nnet.connect:example.com:443";
	t.nbf = 1000;
	t.exp = 2000000000;
	t.uses_left = uses;
	t.issued_at = 1000;
	snprintf(t.issued_by, sizeof(t.issued_by), "uid:0");
	return t;
}

static const uint8_t *
id_of(uint8_t b)
{
	static uint8_t ids[8][CAP_ID_LEN];
	static int n;
	uint8_t *p = ids[n++ % 8];

	memset(p, b, CAP_ID_LEN);
	return p;
}

static int
count_fn(void *arg, const struct st_token *t)
{
	(void)t;
	(*(int *)arg)++;
	return 0;
}

static int
count_req(void *arg, const struct st_request *r)
{
	(void)r;
	(*(int *)arg)++;
	return 0;
}

static void
test_keys(void)
{
	struct st *st = NULL;
	struct st_key_info *keys = NULL;
	struct cap_keyring *akr = NULL;
	uint8_t kid1[CAP_KID_LEN], kid2[CAP_KID_LEN], sig[64], skid[CAP_KID_LEN], bogus[CAP_KID_LEN] = { 9 };
	const uint8_t msg[] = "hello";
	char path[512], hex[17];
	struct stat sb;
	size_t n = 0;

	T_ERR(st_open(sub("k"), &st), 0, "st_open on a fresh directory");
	T_OK(stat(sub("k"), &sb) == 0 && (sb.st_mode & 0777) == 0700, "state directory is 0700");
	T_OK(stat(sub("k/state.db"), &sb) == 0 && (sb.st_mode & 0777) == 0600, "state.db is 0600");
	T_ERR(cap_keyring_signer(st_keyring(st), kid1), 0, "a first signing key was created");
	cap_hex(kid1, CAP_KID_LEN, hex);
	snprintf(path, sizeof(path), "%s/keys/%s.key", sub("k"), hex);
	T_OK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "its secret key file is 0600");
	snprintf(path, sizeof(path), "%s/keys/%s.pub", sub("k"), hex);
	T_OK(stat(path, &sb) == 0 && sb.st_size == 65, "and its public key is stored");
	T_ERR(cap_sign(st_keyring(st), "test", msg, sizeof(msg), sig, skid), 0, "sign with key 1");
	T_ERR(st_rotate_key(st, kid2), 0, "st_rotate_key");
	T_OK(memcmp(kid1, kid2, CAP_KID_LEN) != 0, "a new key id");
	T_ERR(cap_keyring_signer(st_keyring(st), skid), 0, "signer");
	T_OK(memcmp(skid, kid2, CAP_KID_LEN) == 0, "the new key signs");
	T_ERR(cap_verify(st_keyring(st), kid1, "test", msg, sizeof(msg), sig), 0,
	    "the old key still verifies");
	T_ERR(st_retire_key(st, kid2), CB_EBUSY, "the signing key cannot be retired");
	T_ERR(st_retire_key(st, bogus), CB_ENOENT, "an unknown key cannot be retired");
	T_ERR(st_retire_key(st, kid1), 0, "retire the old key");
	T_ERR(cap_verify(st_keyring(st), kid1, "test", msg, sizeof(msg), sig), CB_ERETIRED,
	    "the retired key no longer verifies tokens");
	T_ERR(st_audit_keyring(st, &akr), 0, "st_audit_keyring");
	T_ERR(cap_verify(akr, kid1, "test", msg, sizeof(msg), sig), 0,
	    "... which still verifies old audit checkpoints");
	cap_keyring_free(akr);
	T_ERR(st_key_list(st, &keys, &n), 0, "st_key_list");
	T_OK(n == 2 && keys[0].retired_at != 0 && !keys[0].signing && keys[1].signing &&
	    keys[1].retired_at == 0, "two keys: one retired, one signing");
	free(keys);
	{
		struct st *st2 = NULL;

		T_ERR(st_open(sub("k"), &st2), CB_EBUSY, "a second opener of the same state is refused");
		st_close(st2);
	}
	st_close(st);
	st = NULL;
	T_ERR(st_open(sub("k"), &st), 0, "reopen");
	T_ERR(cap_keyring_signer(st_keyring(st), skid), 0, "signer after reopen");
	T_OK(memcmp(skid, kid2, CAP_KID_LEN) == 0, "key 2 still signs after reopen");
	T_ERR(cap_verify(st_keyring(st), kid1, "test", msg, sizeof(msg), sig), CB_ERETIRED,
	    "key 1 still retired after reopen");
	T_ERR(st_key_list(st, &keys, &n), 0, "list");
	T_OK(n == 2, "no extra key generated on reopen");
	free(keys);
	st_close(st);
}

static void
test_tokens(void)
{
	struct st *st = NULL;
	struct st_token t, got;
	uint32_t left = 0;
	size_t count = 99;
	uint64_t ep;
	int n = 0;

	T_ERR(st_open(sub("t"), &st), 0, "open");
	t = tok(0xa0, -1, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add root A");
	t = tok(0xb0, 0xa0, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add B derived from A");
	t = tok(0xc0, 0xb0, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add C derived from B");
	t = tok(0xd0, 0xa0, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add D derived from A");
	t = tok(0xe0, -1, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add unrelated E");
	T_ERR(st_token_add(st, &t), CB_EEXIST, "a duplicate id is refused");
	t = tok(0xf0, 0x77, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), CB_ENOENT, "a child of an unknown parent is refused");
	T_ERR(st_token_state(st, id_of(0xf0)), CB_ENOENT, "... and stays unknown");
	t = tok(0xe1, -1, ST_UNLIMITED);
	t.sandbox[0] = '\0';
	T_ERR(st_token_add(st, &t), CB_EINVAL, "an empty sandbox is refused");
	T_ERR(st_token_state(st, id_of(0xc0)), 0, "C is valid");
	T_ERR(st_token_state(st, id_of(0x11)), CB_ENOENT, "an unknown id is refused by st_token_state");
	T_OK(!st_is_revoked(st, id_of(0x11)), "st_is_revoked is false for an unknown id");
	T_ERR(st_token_get(st, id_of(0xc0), &got), 0, "st_token_get C");
	T_OK(got.has_parent && memcmp(got.parent, id_of(0xb0), CAP_ID_LEN) == 0 &&
	    strcmp(got.sandbox, "sb-192") == 0 && strstr(got.caps, "net.connect") != NULL &&
	    got.uses_left == ST_UNLIMITED && got.revoked_at == 0, "C's record round-trips");
	st_token_clear(&got);

	ep = st_epoch(st);
	T_ERR(st_revoke(st, id_of(0xb0), 5000, &count), 0, "revoke B");
	T_OK(count == 2, "B and its child C revoked on disk (%zu)", count);
	T_OK(st_epoch(st) > ep, "the epoch moved (caches drop)");
	T_OK(st_is_revoked(st, id_of(0xb0)) && st_is_revoked(st, id_of(0xc0)), "B and C revoked in memory");
	T_OK(!st_is_revoked(st, id_of(0xa0)) && !st_is_revoked(st, id_of(0xd0)) &&
	    !st_is_revoked(st, id_of(0xe0)), "A, D and E untouched");
	T_ERR(st_token_state(st, id_of(0xc0)), CB_EREVOKED, "C's state is revoked");
	T_ERR(st_token_get(st, id_of(0xc0), &got), 0, "get C");
	T_OK(got.revoked_at == 5000, "C reports B's revocation time (revoked through its parent)");
	st_token_clear(&got);
	t = tok(0xc1, 0xb0, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), CB_EREVOKED, "deriving from a revoked token is refused");
	T_ERR(st_revoke(st, id_of(0xb0), 6000, &count), 0, "revoking again is fine");
	T_OK(count == 0, "... and changes nothing");
	T_ERR(st_revoke(st, id_of(0x12), 6000, &count), CB_ENOENT, "revoking an unknown id");
	T_ERR(st_revoke(st, id_of(0xa0), 7000, &count), 0, "revoke A");
	T_OK(count == 2 && st_is_revoked(st, id_of(0xd0)), "A and D newly revoked (%zu)", count);
	T_ERR(st_token_list(st, NULL, count_fn, &n), 0, "st_token_list");
	T_OK(n == 5, "5 tokens listed (%d)", n);
	n = 0;
	T_ERR(st_token_list(st, "sb-224", count_fn, &n), 0, "st_token_list by sandbox");
	T_OK(n == 1, "1 token of sandbox sb-224 (%d)", n);

	/* deep chains are bounded */
	{
		int i, rc = 0;

		t = tok(1, -1, ST_UNLIMITED);
		T_ERR(st_token_add(st, &t), 0, "chain root");
		for (i = 2; i <= ST_MAX_DEPTH + 1 && rc == 0; i++) {
			t = tok((uint8_t)i, i - 1, ST_UNLIMITED);
			rc = st_token_add(st, &t);
		}
		T_ERR(rc, 0, "a chain of depth %d", ST_MAX_DEPTH);
		t = tok((uint8_t)(ST_MAX_DEPTH + 2), ST_MAX_DEPTH + 1, ST_UNLIMITED);
		T_ERR(st_token_add(st, &t), CB_ETOOBIG, "one deeper is refused");
		T_ERR(st_revoke(st, id_of(1), 8000, &count), 0, "revoke the chain's root");
		T_OK(count == ST_MAX_DEPTH + 1 && st_is_revoked(st, id_of(ST_MAX_DEPTH + 1)),
		    "the deepest token is revoked (%zu rows)", count);
	}

	/* use limits */
	t = tok(0x50, -1, 2);
	T_ERR(st_token_add(st, &t), 0, "add a token with 2 uses");
	T_ERR(st_use(st, id_of(0x50), &left), 0, "use 1");
	T_OK(left == 1, "1 left");
	T_ERR(st_use(st, id_of(0x50), &left), 0, "use 2");
	T_OK(left == 0, "0 left");
	T_ERR(st_use(st, id_of(0x50), &left), CB_ESPENT, "use 3 refused: spent");
	T_ERR(st_token_state(st, id_of(0x50)), CB_ESPENT, "its state is spent");
	t = tok(0x51, -1, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add an unlimited token");
	T_ERR(st_use(st, id_of(0x51), &left), 0, "using it");
	T_OK(left == ST_UNLIMITED, "reports unlimited");
	T_ERR(st_use(st, id_of(0xc0), &left), CB_EREVOKED, "using a revoked token is refused");
	T_ERR(st_use(st, id_of(0x13), &left), CB_ENOENT, "using an unknown token is refused");
	t = tok(0x52, -1, 0);
	T_ERR(st_token_add(st, &t), 0, "add a token with 0 uses");
	T_ERR(st_use(st, id_of(0x52), &left), CB_ESPENT, "it is spent from the start");
	st_close(st);

	st = NULL;
	T_ERR(st_open(sub("t"), &st), 0, "reopen");
	T_OK(st_is_revoked(st, id_of(0xc0)) && st_is_revoked(st, id_of(0xd0)) &&
	    !st_is_revoked(st, id_of(0xe0)), "revocations survive a reopen");
	T_ERR(st_token_state(st, id_of(0x50)), CB_ESPENT, "spent survives a reopen");
	T_ERR(st_token_state(st, id_of(0x51)), 0, "the unlimited token is still fine");
	st_close(st);
}

static void
test_requests(void)
{
	struct st *st = NULL;
	struct st_request r, g;
	struct st_token t;
	uint64_t now = cb_now(), id1, id2, id3, id4;
	size_t n = 0;
	int cnt = 0;

	T_ERR(st_open(sub("r"), &st), 0, "open");
	memset(&r, 0, sizeof(r));
	snprintf(r.sandbox, sizeof(r.sandbox), "agent-1");
	snprintf(r.command, sizeof(r.command), "python3 agent.py");
	snprintf(r.capability, sizeof(r.capability), "net.connect:api.example.com:443");
	snprintf(r.reason, sizeof(r.reason), "fetch the docs");
	r.ttl = 600;
	r.asked_at = now;
	r.expires_at = now + 300;
	T_ERR(st_request_add(st, &r), 0, "add request 1");
	id1 = r.id;
	T_ERR(st_request_add(st, &r), 0, "add request 2");
	id2 = r.id;
	r.expires_at = now - 1;
	T_ERR(st_request_add(st, &r), 0, "add request 3 (already past its expiry)");
	id3 = r.id;
	r.expires_at = now + 2;
	T_ERR(st_request_add(st, &r), 0, "add request 4 (expires in 2 s)");
	id4 = r.id;
	T_OK(id1 != id2 && id2 != id3 && id3 != id4, "distinct ids");
	T_ERR(st_request_list(st, ST_REQ_PENDING, count_req, &cnt), 0, "list pending");
	T_OK(cnt == 4, "4 pending (%d)", cnt);
	T_ERR(st_request_expire(st, now, &n), 0, "st_request_expire");
	T_OK(n == 1, "request 3 expired (%zu)", n);
	T_ERR(st_request_get(st, id3, &g), 0, "get 3");
	T_OK(g.state == ST_REQ_EXPIRED, "request 3 is expired");
	t = tok(0x71, -1, ST_UNLIMITED);
	t.elevated = true;
	T_ERR(st_request_approve(st, &(struct st_approval){ .id = id3, .by = "uid:0",
	    .now = now, .ttl = 60, .scope = ST_SCOPE_ONCE, .tok = &t }), CB_EEXPIREDREQ,
	    "an expired request cannot be approved");
	T_ERR(st_token_state(st, t.id), CB_ENOENT, "... and no token was recorded");

	T_ERR(st_request_approve(st, &(struct st_approval){ .id = id1, .by = "tty",
	    .now = now + 1, .ttl = 120, .scope = ST_SCOPE_SESSION }), CB_EINVAL,
	    "an approval without its token is refused");
	T_ERR(st_request_get(st, id1, &g), 0, "get 1");
	T_OK(g.state == ST_REQ_PENDING, "... and request 1 stays pending");
	T_ERR(st_request_approve(st, &(struct st_approval){ .id = id1, .by = "tty",
	    .now = now + 1, .ttl = 120, .scope = ST_SCOPE_SESSION, .tok = &t }), 0, "approve 1");
	T_ERR(st_request_get(st, id1, &g), 0, "get 1");
	T_OK(g.state == ST_REQ_APPROVED && strcmp(g.decided_by, "tty") == 0 && g.approved_ttl == 120 &&
	    g.scope == ST_SCOPE_SESSION && g.has_token && memcmp(g.token_id, t.id, CAP_ID_LEN) == 0 &&
	    g.decided_at == now + 1 && strcmp(g.capability, "net.connect:api.example.com:443") == 0,
	    "request 1 approved by tty for 120 s, session scope, with its token");
	T_ERR(st_token_state(st, t.id), 0, "the elevation token is recorded");
	T_ERR(st_request_approve(st, &(struct st_approval){ .id = id1, .by = "tty",
	    .now = now + 1, .ttl = 120, .scope = ST_SCOPE_ONCE, .tok = &t }), CB_EEXIST,
	    "approving twice is refused");
	T_ERR(st_request_deny(st, id2, "uid:1000", now + 2, "not today"), 0, "deny 2");
	T_ERR(st_request_get(st, id2, &g), 0, "get 2");
	T_OK(g.state == ST_REQ_DENIED && strcmp(g.decision_reason, "not today") == 0 && !g.has_token,
	    "request 2 denied with its reason");
	T_ERR(st_request_deny(st, 999, "uid:0", now, NULL), CB_ENOENT, "unknown request");
	t = tok(0x72, -1, ST_UNLIMITED);
	T_ERR(st_request_approve(st, &(struct st_approval){ .id = id4, .by = "tty",
	    .now = now + 3, .ttl = 60, .scope = ST_SCOPE_ONCE, .tok = &t }), CB_EEXPIREDREQ,
	    "approval after the request lapsed is refused");
	T_ERR(st_request_get(st, id4, &g), 0, "get 4");
	T_OK(g.state == ST_REQ_EXPIRED, "... and it is marked expired");
	T_ERR(st_token_state(st, t.id), CB_ENOENT, "... with no token recorded");

	/* a pending request stays pending across a restart, or expires */
	r.expires_at = now + 3600;
	T_ERR(st_request_add(st, &r), 0, "add request 5 (an hour)");
	r.expires_at = now;
	T_ERR(st_request_add(st, &r), 0, "add request 6 (expiring now)");
	st_close(st);
	st = NULL;
	T_ERR(st_open(sub("r"), &st), 0, "reopen");
	T_ERR(st_request_get(st, id4 + 1, &g), 0, "get 5");
	T_OK(g.state == ST_REQ_PENDING, "request 5 still pending after restart");
	T_ERR(st_request_get(st, id4 + 2, &g), 0, "get 6");
	T_OK(g.state == ST_REQ_EXPIRED, "request 6 expired on open");
	st_close(st);
}

static void
test_audit_head(void)
{
	struct st *st = NULL;
	uint8_t id[16], hash[32], gid[16], gh[32];
	uint64_t seq = 0;

	T_ERR(st_open(sub("a"), &st), 0, "open");
	T_ERR(st_get_audit_head(st, gid, &seq, gh), CB_ENOENT, "no audit head yet");
	memset(id, 7, sizeof(id));
	memset(hash, 8, sizeof(hash));
	st_audit_checkpoint_cb(st, id, 41, hash);
	T_ERR(st_audit_head_error(st), 0, "the checkpoint callback stored it");
	memset(hash, 9, sizeof(hash));
	T_ERR(st_set_audit_head(st, id, 77, hash), 0, "st_set_audit_head");
	st_close(st);
	st = NULL;
	T_ERR(st_open(sub("a"), &st), 0, "reopen");
	T_ERR(st_get_audit_head(st, gid, &seq, gh), 0, "st_get_audit_head");
	T_OK(seq == 77 && memcmp(gid, id, 16) == 0 && memcmp(gh, hash, 32) == 0,
	    "the last checkpoint survives");
	st_close(st);
}

/* A child does work, reports what it completed, and is SIGKILLed (no
 * st_close, no cleanup).  The parent checks everything survived. */
static void
test_sigkill(void)
{
	int pfd[2];
	pid_t pid;
	int status = 0;
	char buf[64] = { 0 };
	struct st *st = NULL;
	struct st_request g;
	uint64_t rid = 0;
	ssize_t n;

	if (pipe(pfd) != 0)
		abort();
	pid = fork();
	if (pid == 0) {
		struct st *c = NULL;
		struct st_token t;
		struct st_request r;
		uint32_t left;
		char msg[64];

		close(pfd[0]);
		if (st_open(sub("kill"), &c) != 0)
			_exit(1);
		t = tok(0x10, -1, ST_UNLIMITED);
		if (st_token_add(c, &t) != 0)
			_exit(2);
		t = tok(0x20, 0x10, ST_UNLIMITED);
		if (st_token_add(c, &t) != 0)
			_exit(3);
		t = tok(0x30, -1, 3);
		if (st_token_add(c, &t) != 0 || st_use(c, t.id, &left) != 0 || left != 2)
			_exit(4);
		if (st_revoke(c, id_of(0x10), 42, NULL) != 0)
			_exit(5);
		memset(&r, 0, sizeof(r));
		snprintf(r.sandbox, sizeof(r.sandbox), "agent-k");
		snprintf(r.capability, sizeof(r.capability), "fs.write:/tmp/**");
		r.asked_at = cb_now();
		r.expires_at = cb_now() + 3600;
		if (st_request_add(c, &r) != 0)
			_exit(6);
		snprintf(msg, sizeof(msg), "%llu\n", (unsigned long long)r.id);
		if (write(pfd[1], msg, strlen(msg)) < 0)
			_exit(7);
		/* now die mid-flight: a big batch in progress */
		{
			static struct st_token many[20000];
			int i;

			for (i = 0; i < 20000; i++) {
				many[i] = tok(0, -1, ST_UNLIMITED);
				memcpy(many[i].id, &i, sizeof(i));
				many[i].id[15] = 0xee;
			}
			if (write(pfd[1], "go\n", 3) < 0)
				_exit(8);
			if (st_token_add_batch(c, many, 20000) != 0)
				_exit(10);
		}
		raise(SIGKILL);
		_exit(9);
	}
	close(pfd[1]);
	n = read(pfd[0], buf, sizeof(buf) - 1);
	if (n > 0)
		rid = strtoull(buf, NULL, 10);
	usleep(20000);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(pfd[0]);
	T_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child was SIGKILLed (status %d)", status);
	T_OK(rid > 0, "the child completed its durable work first");
	T_ERR(st_open(sub("kill"), &st), 0, "the state reopens after kill -9");
	T_OK(st_is_revoked(st, id_of(0x10)) && st_is_revoked(st, id_of(0x20)), "revoked stays revoked");
	T_ERR(st_token_state(st, id_of(0x20)), CB_EREVOKED, "the child token too");
	{
		struct st_token got;

		T_ERR(st_token_get(st, id_of(0x30), &got), 0, "the limited token");
		T_OK(got.uses_left == 2, "a spent use stays spent (%u left)", got.uses_left);
		st_token_clear(&got);
	}
	T_ERR(st_request_get(st, rid, &g), 0, "the request");
	T_OK(g.state == ST_REQ_PENDING, "a pending request stays pending");
	{
		int cnt = 0;
		uint8_t first[CAP_ID_LEN] = { 0 }, last[CAP_ID_LEN] = { 0 };
		int i = 19999;
		bool a, b;

		first[15] = 0xee;
		memcpy(last, &i, sizeof(i));
		last[15] = 0xee;
		a = st_token_state(st, first) == 0;
		b = st_token_state(st, last) == 0;
		T_ERR(st_token_list(st, NULL, count_fn, &cnt), 0, "list");
		T_OK(a == b && (cnt == 3 || cnt == 20003),
		    "the interrupted batch is all or nothing (%d tokens, %s)", cnt, a ? "all" : "none");
	}
	st_close(st);
}

/* Issue 10, hole 7: elevations are recorded against the sandbox instance
 * they were granted to, and every one of them ends with it (no fixed-size
 * table), also when a later open ends what a crash left behind. */
static void
test_instances(void)
{
	struct st *st = NULL;
	struct st_request r;
	struct st_token t;
	uint8_t (*ids)[CAP_ID_LEN] = NULL;
	uint64_t now = cb_now(), a = 0, b = 0, c = 0, inst = 0;
	size_t n = 0;
	bool all;

	T_ERR(st_open(sub("inst"), &st), 0, "open");
	T_ERR(st_instance_begin(st, "same-id", now, &a), 0, "instance a of same-id");
	T_ERR(st_instance_begin(st, "same-id", now, &b), 0, "instance b of the same id");
	T_OK(a != 0 && b != 0 && a != b, "instances are distinct even for one id (%llu, %llu)",
	    (unsigned long long)a, (unsigned long long)b);
	T_ERR(st_instance_begin(st, "", now, &c), CB_EINVAL, "an empty sandbox id is refused");
	/* 100 elevations for a (well past any fixed table), one for b */
	all = true;
	for (unsigned i = 0; i < 100; i++) {
		t = tok(0, -1, ST_UNLIMITED);
		memset(t.id, 0, CAP_ID_LEN);
		t.id[0] = 0xe0;
		t.id[1] = (uint8_t)i;
		t.elevated = true;
		t.instance = a;
		all = all && st_token_add(st, &t) == 0;
	}
	T_OK(all, "100 elevated tokens recorded for instance a");
	memset(&r, 0, sizeof(r));
	snprintf(r.sandbox, sizeof(r.sandbox), "same-id");
	snprintf(r.capability, sizeof(r.capability), "fs.read:/etc/hostname");
	r.ttl = 60;
	r.asked_at = now;
	r.expires_at = now + 300;
	T_ERR(st_request_add(st, &r), 0, "a request of instance b");
	t = tok(0xe1, -1, ST_UNLIMITED);
	t.elevated = true;
	t.instance = b;
	T_ERR(st_request_approve(st, &(struct st_approval){ .id = r.id, .by = "uid:0",
	    .now = now, .ttl = 60, .scope = ST_SCOPE_ONCE, .tok = &t }), 0, "approved for b");
	T_ERR(st_token_instance(st, t.id, &inst), 0, "the approval's instance is recorded");
	T_OK(inst == b, "... as b");
	T_ERR(st_token_instance(st, id_of(0x99), &inst), CB_ENOENT, "an unknown token has none");
	{
		struct st_token child = tok(0xe2, -1, ST_UNLIMITED);

		child.has_parent = true;
		memset(child.parent, 0, CAP_ID_LEN);
		child.parent[0] = 0xe0;
		child.parent[1] = 7;
		T_ERR(st_token_add(st, &child), 0, "a token derived from one of a's");
		T_ERR(st_instance_end(st, a, now + 5, &ids, &n), 0, "end instance a");
		T_OK(n == 100, "all 100 of its elevations revoked (%zu)", n);
		T_ERR(st_token_state(st, child.id), CB_EREVOKED, "... and what was derived from them");
		free(ids);
		ids = NULL;
	}
	all = true;
	for (unsigned i = 0; i < 100; i++) {
		uint8_t id[CAP_ID_LEN] = { 0xe0, (uint8_t)i };

		all = all && st_token_state(st, id) == CB_EREVOKED;
	}
	T_OK(all, "every elevation of a is revoked");
	T_ERR(st_token_state(st, t.id), 0, "b's elevation is not");
	T_ERR(st_instance_end(st, a, now + 6, &ids, &n), 0, "ending a again");
	T_OK(n == 0, "... revokes nothing new");
	free(ids);
	ids = NULL;
	/* b is left open, as a crash would: the next open's end_all ends it */
	st_close(st);
	st = NULL;
	T_ERR(st_open(sub("inst"), &st), 0, "reopen");
	T_ERR(st_token_state(st, t.id), 0, "b's elevation survives the reopen itself");
	T_ERR(st_instance_end_all(st, now + 10, &ids, &n), 0, "end every open instance");
	T_OK(n == 1 && memcmp(ids[0], t.id, CAP_ID_LEN) == 0, "... b's elevation revoked (%zu)", n);
	T_ERR(st_token_state(st, t.id), CB_EREVOKED, "... and it is");
	free(ids);
	st_close(st);
	st = NULL;
	T_ERR(st_open(sub("inst"), &st), 0, "reopen again");
	T_ERR(st_token_state(st, t.id), CB_EREVOKED, "the revocation is durable");
	st_close(st);
}

/* An ephemeral state (run without --state): the same operations, nothing on
 * disk, and nothing there for a second open to find. */
static void
test_ephemeral(void)
{
	struct st *st = NULL, *st2 = NULL;
	struct st_token a = tok(0xe1, -1, ST_UNLIMITED), b = tok(0xe2, 0xe1, ST_UNLIMITED);
	uint8_t kid1[CAP_KID_LEN], kid2[CAP_KID_LEN], skid[CAP_KID_LEN], sig[64];
	static const uint8_t msg[] = "ephemeral";
	size_t count = 0;
	int entries = 0;
	DIR *d;

	mkdir(sub("e"), 0700);
	T_ERR(st_open_ephemeral(sub("e"), &st, NULL, 0), 0, "st_open_ephemeral");
	T_OK(st_is_new(st), "an ephemeral state is always new");
	T_OK(st_dseq(st) == 0 && st_time_hwm(st) == 0, "... starts at decision 0, no time seen");
	T_ERR(cap_keyring_signer(st_keyring(st), kid1), 0, "... and has a signing key");
	T_ERR(cap_sign(st_keyring(st), "test", msg, sizeof(msg), sig, skid), 0, "... that signs");
	T_ERR(st_rotate_key(st, kid2), 0, "rotate-key works in memory");
	T_OK(memcmp(kid1, kid2, CAP_KID_LEN) != 0, "... to a new key");
	T_ERR(cap_verify(st_keyring(st), kid1, "test", msg, sizeof(msg), sig), 0,
	    "... and the old one still verifies");
	T_ERR(st_token_add(st, &a), 0, "a token recorded");
	T_ERR(st_token_add(st, &b), 0, "a child recorded");
	T_ERR(st_revoke(st, id_of(0xe1), 5000, &count), 0, "the parent revoked");
	T_OK(count == 2, "... with its child (%zu)", count);
	T_ERR(st_token_state(st, id_of(0xe2)), CB_EREVOKED, "the child is revoked");
	if ((d = opendir(sub("e"))) != NULL) {
		struct dirent *e;

		while ((e = readdir(d)) != NULL)
			entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
		closedir(d);
	}
	T_OK(entries == 0, "nothing was written to the directory (%d entries)", entries);
	{
		/* Ending an instance: without an elevation ever written the
		 * state skips looking for one (instance_mark_ended); with one
		 * it is found and revoked as in a state on disk. */
		struct st_token e = tok(0xe3, -1, ST_UNLIMITED);
		uint8_t (*ids)[CAP_ID_LEN] = NULL;
		uint64_t i1 = 0, i2 = 0;
		size_t n = 9;

		T_ERR(st_instance_begin(st, "eph", 5000, &i1), 0, "an instance begins");
		T_ERR(st_instance_end(st, i1, 5001, &ids, &n), 0, "... ends, no elevation written yet");
		T_OK(n == 0 && ids == NULL, "... revoking nothing (%zu)", n);
		T_ERR(st_instance_begin(st, "eph", 5002, &i2), 0, "a second instance begins");
		e.elevated = true;
		e.instance = i2;
		T_ERR(st_token_add(st, &e), 0, "... an elevation recorded for it");
		T_ERR(st_instance_end(st, i1, 5003, &ids, &n), 0, "ending the first again");
		T_OK(n == 0, "... revokes nothing of the second's (%zu)", n);
		free(ids);
		ids = NULL;
		T_ERR(st_instance_end(st, i2, 5004, &ids, &n), 0, "the second ends");
		T_OK(n == 1 && memcmp(ids[0], e.id, CAP_ID_LEN) == 0, "... its elevation revoked (%zu)", n);
		T_ERR(st_token_state(st, e.id), CB_EREVOKED, "... and it is");
		free(ids);
	}
	T_ERR(st_open_ephemeral(sub("e"), &st2, NULL, 0), 0, "a second ephemeral state beside it");
	T_ERR(st_token_state(st2, id_of(0xe1)), CB_ENOENT, "... shares nothing with the first");
	st_close(st2);
	st_close(st);
}

/* The rows of sqlite_master and the user_version of db, as one string. */
static void
schema_of(sqlite3 *db, char *out, size_t len)
{
	sqlite3_stmt *q = NULL;
	size_t n = 0;

	out[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT type, name, tbl_name, sql FROM sqlite_master "
	    "ORDER BY name", -1, &q, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(q) == SQLITE_ROW && n < len)
		for (int i = 0; i < 4; i++)
			n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s|",
			    sqlite3_column_text(q, i) ? (const char *)sqlite3_column_text(q, i) : "");
	sqlite3_finalize(q);
	if (n < len && sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK) {
		if (sqlite3_step(q) == SQLITE_ROW)
			snprintf(out + n, len - n, "v%d", sqlite3_column_int(q, 0));
		sqlite3_finalize(q);
	}
}

/* The empty database an ephemeral state starts from (made at build time by
 * st-mkimage) is exactly what running the schema makes. */
static void
test_image(void)
{
#include "schema_image.h"
	static char want[16384], got[16384];
	sqlite3 *a = NULL, *b = NULL;
	unsigned char *p = sqlite3_malloc64(sizeof(st_schema_image));

	T_OK(sqlite3_open(":memory:", &a) == SQLITE_OK &&
	    sqlite3_exec(a, st_schema, NULL, NULL, NULL) == SQLITE_OK, "the schema runs");
	schema_of(a, want, sizeof(want));
	T_OK(sqlite3_open(":memory:", &b) == SQLITE_OK && p != NULL, "a database for the image");
	if (p)
		memcpy(p, st_schema_image, sizeof(st_schema_image));
	T_OK(p && sqlite3_deserialize(b, "main", p, sizeof(st_schema_image),
	    sizeof(st_schema_image), SQLITE_DESERIALIZE_FREEONCLOSE |
	    SQLITE_DESERIALIZE_RESIZEABLE) == SQLITE_OK, "the built image loads");
	schema_of(b, got, sizeof(got));
	T_OK(strstr(want, "CREATE TABLE tokens") != NULL && strstr(want, "v1") != NULL,
	    "the schema has its tables and version");
	T_OK(strcmp(want, got) == 0, "the image holds exactly the schema's tables, indexes and version");
	sqlite3_close(a);
	sqlite3_close(b);
}

/* st_revoke_many: several revocations, one transaction, each its own
 * decision with its own record (docs/cluster.md, "Group commit"). */
static void
test_revoke_many(void)
{
	struct st *st = NULL;
	struct st_token t;
	struct st_revoke_item *it = calloc(5, sizeof(*it));
	struct st_decision rec;
	const uint8_t bytes[5] = { 0x30, 0x31, 0x99, 0x32, 0x30 };
	uint64_t d0;

	if (!it)
		abort();
	T_ERR(st_open(sub("many"), &st), 0, "open");
	t = tok(0x30, -1, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add root 30");
	t = tok(0x31, 0x30, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add 31 derived from 30");
	t = tok(0x32, -1, ST_UNLIMITED);
	T_ERR(st_token_add(st, &t), 0, "add 32");
	d0 = st_dseq(st);
	for (int i = 0; i < 5; i++) {
		memset(it[i].id, bytes[i], CAP_ID_LEN);
		snprintf(it[i].dec.op, sizeof(it[i].dec.op), "revoke");
		snprintf(it[i].dec.detail, sizeof(it[i].dec.detail), "item %d", i);
		it[i].dec.has_token = true;
		memcpy(it[i].dec.token, it[i].id, CAP_ID_LEN);
	}
	/* 30, 31 (its child: still its own decision), an unknown id, 32, and
	 * 30 again in the same batch */
	T_ERR(st_revoke_many(st, it, 5, 9000), 0, "st_revoke_many");
	T_OK(it[0].rc == 0 && it[0].count == 2 && it[0].dec.dseq == d0 + 1, "30 (and 31 under it): decision %llu",
	    (unsigned long long)it[0].dec.dseq);
	T_OK(it[1].rc == 0 && it[1].dec.dseq == d0 + 2, "31: its own decision");
	T_OK(it[2].rc == CB_ENOENT && it[2].dec.dseq == 0, "an unknown id: CB_ENOENT, no decision");
	T_OK(it[3].rc == 0 && it[3].count == 1 && it[3].dec.dseq == d0 + 3, "32: decision");
	T_OK(it[4].rc == 0 && it[4].count == 0 && it[4].dec.dseq == 0, "30 twice: the second changes nothing");
	T_OK(st_dseq(st) == d0 + 3, "the sequence moved by three");
	T_OK(st_is_revoked(st, id_of(0x30)) && st_is_revoked(st, id_of(0x31)) &&
	    st_is_revoked(st, id_of(0x32)), "all revoked in memory");
	T_OK(st_decision_at(st, d0 + 1, &rec) == 0 && strcmp(rec.detail, "item 0") == 0 &&
	    st_decision_at(st, d0 + 2, &rec) == 0 && strcmp(rec.detail, "item 1") == 0 &&
	    st_decision_at(st, d0 + 3, &rec) == 0 && strcmp(rec.detail, "item 3") == 0 &&
	    rec.has_token && memcmp(rec.token, id_of(0x32), CAP_ID_LEN) == 0,
	    "each decision's record is kept for a start after a crash");
	T_OK(st_last_decision(st, &rec) == 0 && rec.dseq == d0 + 3, "the last is the last decision");
	T_ERR(st_decision_at(st, d0 + 4, &rec), CB_ENOENT, "no record beyond");
	st_close(st);
	st = NULL;
	T_ERR(st_open(sub("many"), &st), 0, "reopen");
	T_OK(st_dseq(st) == d0 + 3 && st_is_revoked(st, id_of(0x31)) && st_is_revoked(st, id_of(0x32)),
	    "sequence and revocations are durable");
	T_OK(st_decision_at(st, d0 + 2, &rec) == 0 && rec.dseq == d0 + 2, "... and the kept records");
	for (int i = 0; i < 2; i++)
		memset(it[i].id, 0x30 + 2 * i, CAP_ID_LEN);
	T_ERR(st_revoke_many(st, it, 2, 9100), 0, "revoking revoked tokens in a batch");
	T_OK(st_dseq(st) == d0 + 3 && it[0].dec.dseq == 0 && it[1].dec.dseq == 0,
	    "... records no decision");
	st_close(st);
	free(it);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL)
		return 1;
	test_image();
	test_revoke_many();
	test_keys();
	test_tokens();
	test_requests();
	test_instances();
	test_audit_head();
	test_sigkill();
	test_ephemeral();
	t_rmtmp(dir);
	return t_done();
}
