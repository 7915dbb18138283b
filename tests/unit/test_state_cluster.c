/*
 * test_state_cluster.c - what other brokers of a cluster decided, applied
 * to the state in memory (st_cl_key, st_cl_token, st_cl_revoke): another
 * broker's token is known and verifies, its descendants fall with it, a
 * revocation that arrives before its token still holds, a foreign
 * use-limited token is not honoured here, our own token revoked elsewhere
 * stays revoked after a restart; and a decision that changes nothing (a
 * revoke of a revoked token) leaves the decision sequence where it was.
 * Test code (trusted); works in a private temporary directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps/caps.h"
#include "state/state.h"
#include "tests/tap.h"

static char dir[] = "/tmp/test_state_cluster.XXXXXX";

static const uint8_t *
id_of(uint8_t b)
{
	static uint8_t ids[8][CAP_ID_LEN];
	static int n;
	uint8_t *p = ids[n++ % 8];

	memset(p, b, CAP_ID_LEN);
	return p;
}

static struct st_token
tok(uint8_t idbyte)
{
	struct st_token t;

	memset(&t, 0, sizeof(t));
	memset(t.id, idbyte, CAP_ID_LEN);
	snprintf(t.sandbox, sizeof(t.sandbox), "sb");
	t.caps = "fs.read:/work/**";
	t.nbf = 1000;
	t.exp = 2000000000;
	t.uses_left = ST_UNLIMITED;
	t.issued_at = 1000;
	snprintf(t.issued_by, sizeof(t.issued_by), "uid:0");
	return t;
}

/* A token signed by another broker's key verifies once the key is in. */
static void
test_foreign_key(struct st *st)
{
	struct cap_key *k = NULL;
	struct cap_keyring *other = NULL;
	struct cap_claims c;
	struct cap_token *t = NULL;
	uint8_t pk[32];
	char *text = NULL;

	memset(&c, 0, sizeof(c));
	T_OK(cap_key_generate(&k) == 0 && cap_keyring_new(&other) == 0, "another broker's key");
	cap_key_public(k, pk);
	T_OK(cap_keyring_add(other, k, true) == 0, "... signs its tokens");
	snprintf(c.aud, sizeof(c.aud), "sb");
	c.nbf = 1000;
	c.exp = 2000000000;
	T_OK(cap_parse("fs.read:/work/**", &c.caps[0]) == 0, "a capability");
	c.ncaps = 1;
	T_OK(cap_token_issue(other, &c, &text) == 0, "a token minted there");
	T_OK(cap_token_decode(text, strlen(text), &t) == 0, "decodes here");
	T_ERR(cap_token_check_sig(st_keyring(st), t), CB_EUNKNOWNKEY, "unknown key before the cluster says");
	T_ERR(st_cl_key(st, pk, false), 0, "st_cl_key takes the key in");
	T_ERR(cap_token_check_sig(st_keyring(st), t), 0, "the token now verifies here");
	T_ERR(st_cl_key(st, pk, false), 0, "taking it in again is fine");
	T_ERR(st_cl_key(st, pk, true), 0, "the cluster retires it");
	T_ERR(cap_token_check_sig(st_keyring(st), t), CB_ERETIRED, "... and its tokens stop verifying");
	cap_token_free(t);
	free(text);
	cap_claims_clear(&c);
	cap_keyring_free(other);
}

static void
test_tokens(struct st *st)
{
	struct st_token mine = tok(0x50);
	bool ch = false;

	T_ERR(st_token_state(st, id_of(0x10)), CB_ENOENT, "another broker's token is unknown at first");
	T_ERR(st_cl_token(st, id_of(0x10), NULL, false), 0, "st_cl_token takes it in");
	T_ERR(st_token_state(st, id_of(0x10)), 0, "it is known and live");
	T_OK(st_is_foreign(st, id_of(0x10)), "... as another broker's");
	T_ERR(st_cl_token(st, id_of(0x11), id_of(0x10), false), 0, "a token derived from it");
	T_ERR(st_cl_token(st, id_of(0x12), id_of(0x11), false), 0, "... and one derived from that");
	T_ERR(st_cl_revoke(st, id_of(0x10), 5000, &ch), 0, "the root is revoked in the cluster");
	T_OK(ch, "... newly");
	T_ERR(st_token_state(st, id_of(0x12)), CB_EREVOKED, "its grandchild is revoked here");
	T_ERR(st_cl_revoke(st, id_of(0x10), 5000, &ch), 0, "the same revocation again");
	T_OK(!ch, "... changes nothing");

	T_ERR(st_cl_revoke(st, id_of(0x20), 5000, &ch), 0, "a revocation before its token arrives");
	T_ERR(st_cl_token(st, id_of(0x20), NULL, false), 0, "the token arrives");
	T_ERR(st_token_state(st, id_of(0x20)), CB_EREVOKED, "... already revoked");

	T_ERR(st_cl_token(st, id_of(0x30), NULL, true), 0, "another broker's use-limited token");
	T_ERR(st_use(st, id_of(0x30), NULL), CB_EUNSUPPORTED, "its uses are not spent here");

	T_ERR(st_token_add(st, &mine), 0, "a token of ours");
	T_ERR(st_cl_token(st, mine.id, NULL, false), 0, "the cluster echoes it back");
	T_OK(!st_is_foreign(st, mine.id), "... it stays ours");
	T_OK(st_revoke_count(st, mine.id) == 1, "revoking it would revoke 1");
	T_ERR(st_cl_revoke(st, mine.id, 6000, &ch), 0, "another broker revokes it");
	T_ERR(st_token_state(st, mine.id), CB_EREVOKED, "... revoked here at once");
	T_OK(st_revoke_count(st, mine.id) == 0, "revoking it again would revoke none");
}

/* A decision whose change is already made commits nothing: the sequence
 * must not move (it once went back to 0, the armed record's). */
static void
test_noop_decision(struct st *st)
{
	struct st_token t = tok(0x60);
	struct st_decision d;
	uint64_t before;

	T_ERR(st_token_add(st, &t), 0, "a token to revoke");
	memset(&d, 0, sizeof(d));
	snprintf(d.op, sizeof(d.op), "revoke");
	st_decision_arm(st, &d);
	T_ERR(st_revoke(st, t.id, 7000, NULL), 0, "revoked as a decision");
	before = st_dseq(st);
	T_OK(before > 0, "the decision sequence moved (%llu)", (unsigned long long)before);
	st_decision_arm(st, &d);
	T_ERR(st_revoke(st, t.id, 7001, NULL), 0, "revoking it again");
	T_OK(st_dseq(st) == before, "... leaves the sequence at %llu (got %llu)",
	    (unsigned long long)before, (unsigned long long)st_dseq(st));
}

/* Batches (docs/cluster.md, "Group commit"): a token minted elsewhere has
 * no row here, yet revoking it in a batch is a decision and revokes it in
 * memory before the answer; the stream's revocations of our own tokens are
 * written together. */
static void
test_batches(struct st *st)
{
	struct st_token a = tok(0x70), b2 = tok(0x71);
	struct st_revoke_item *it = calloc(2, sizeof(*it));
	uint8_t ids[3 * CAP_ID_LEN];
	bool ch[3];
	uint64_t d0 = st_dseq(st);

	if (!it)
		abort();
	T_ERR(st_cl_token(st, id_of(0x72), NULL, false), 0, "another broker's token");
	memcpy(it[0].id, id_of(0x72), CAP_ID_LEN);
	memcpy(it[1].id, id_of(0x72), CAP_ID_LEN);
	T_ERR(st_revoke_many(st, it, 2, 8000), 0, "revoked here in a batch (twice)");
	T_OK(it[0].rc == 0 && it[0].dec.dseq == d0 + 1 && it[1].dec.dseq == 0 && st_dseq(st) == d0 + 1,
	    "a decision, once, though it has no row here");
	T_ERR(st_token_state(st, id_of(0x72)), CB_EREVOKED, "... revoked in memory at once");
	free(it);

	T_ERR(st_token_add(st, &a), 0, "a token of ours");
	T_ERR(st_token_add(st, &b2), 0, "another");
	memcpy(ids, a.id, CAP_ID_LEN);
	memcpy(ids + CAP_ID_LEN, id_of(0x73), CAP_ID_LEN);
	memcpy(ids + 2 * CAP_ID_LEN, b2.id, CAP_ID_LEN);
	T_ERR(st_cl_revoke_many(st, ids, 3, 8100, ch), 0, "the stream revokes two of ours and an unknown id");
	T_OK(ch[0] && ch[1] && ch[2], "each newly revoked");
	T_ERR(st_token_state(st, a.id), CB_EREVOKED, "ours revoked");
	T_ERR(st_token_state(st, b2.id), CB_EREVOKED, "... both");
	T_ERR(st_cl_revoke_many(st, ids, 3, 8200, ch), 0, "again");
	T_OK(!ch[0] && !ch[1] && !ch[2], "... changes nothing");
}

int
main(void)
{
	struct st *st = NULL;
	struct st_token mine = tok(0x50);

	if (!mkdtemp(dir))
		return 1;
	T_OK(st_open(dir, &st) == 0, "open a fresh state");
	test_foreign_key(st);
	test_tokens(st);
	test_noop_decision(st);
	test_batches(st);
	st_close(st);
	st = NULL;
	T_OK(st_open(dir, &st) == 0, "open it again");
	T_ERR(st_token_state(st, mine.id), CB_EREVOKED, "our token revoked elsewhere stays revoked");
	T_ERR(st_token_state(st, id_of(0x70)), CB_EREVOKED,
	    "ours revoked by the stream in a batch stay revoked (their rows)");
	T_ERR(st_token_state(st, id_of(0x10)), CB_ENOENT,
	    "other brokers' tokens are not kept on disk (the stream is read again at start)");
	st_close(st);
	t_rmtmp(dir);
	return t_done();
}
