/*
 * test_audit_state.c - the audit log wired to the durable state the way the
 * broker wires them: checkpoints signed through st_sign_audit (safe against
 * a key rotation in another thread), their heads stored by
 * st_audit_checkpoint_cb, and verification with st_audit_keyring and the
 * stored head, across a rotation, a retirement and a restart.  Test code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "caps/caps.h"
#include "state/state.h"
#include "tests/tap.h"

static char dir[] = "/tmp/test_audit_state.XXXXXX";

static int
open_log(struct st *st, const char *path, const struct aud_head *expect, struct aud_log **out)
{
	struct aud_opts o;

	aud_opts_default(&o);
	o.checkpoint_lines = 5;
	o.sign = st_sign_audit;
	o.sign_arg = st;
	o.on_checkpoint = st_audit_checkpoint_cb;
	o.on_checkpoint_arg = st;
	o.expect = expect;
	return aud_open(path, NULL, &o, out);
}

static int
head_of(struct st *st, struct aud_head *h)
{
	return st_get_audit_head(st, h->log_id, &h->seq, h->hash);
}

int
main(void)
{
	struct st *st = NULL;
	struct aud_log *log = NULL;
	struct cap_keyring *akr = NULL;
	struct aud_report rep;
	struct aud_head h;
	uint8_t kid1[CAP_KID_LEN], kid2[CAP_KID_LEN];
	char path[300], sdir[300];
	int i, bad = 0;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(sdir, sizeof(sdir), "%s/state", dir);
	snprintf(path, sizeof(path), "%s/state/audit.jsonl", dir);
	T_ERR(st_open(sdir, &st), 0, "st_open");
	T_ERR(head_of(st, &h), CB_ENOENT, "no audit head before the log exists");
	T_ERR(open_log(st, path, NULL, &log), 0, "aud_open signing through st_sign_audit");
	T_ERR(head_of(st, &h), 0, "the genesis checkpoint is in the state");
	T_OK(h.seq == 1, "at seq 1");
	T_ERR(cap_keyring_signer(st_keyring(st), kid1), 0, "key 1");
	for (i = 0; i < 12; i++)
		bad += aud_admin(log, "issue", "sb", "uid:0", NULL, "before rotation") != 0;
	/* rotate while the writer may be signing a checkpoint */
	T_ERR(st_rotate_key(st, kid2), 0, "rotate the key with the log open");
	for (i = 0; i < 12; i++)
		bad += aud_admin(log, "issue", "sb", "uid:0", NULL, "after rotation") != 0;
	T_OK(bad == 0, "24 records appended");
	T_ERR(aud_checkpoint(log), 0, "aud_checkpoint");
	T_ERR(st_retire_key(st, kid1), 0, "retire key 1");
	T_ERR(aud_close(log), 0, "aud_close");
	T_ERR(st_audit_head_error(st), 0, "every head was stored");
	T_ERR(head_of(st, &h), 0, "the head");
	T_ERR(st_audit_keyring(st, &akr), 0, "st_audit_keyring");
	T_ERR(aud_verify(path, akr, &h, &rep), 0, "the log verifies with every key ever used: %s", rep.what);
	T_OK(rep.last_checkpoint == h.seq && rep.unsealed == 0, "the close checkpoint is the stored head");
	T_ERR(aud_verify(path, st_keyring(st), &h, &rep), CB_EAUDIT,
	    "with the token keyring (key 1 retired) old checkpoints fail: %s", rep.what);
	cap_keyring_free(akr);
	st_close(st);

	/* restart: the state's head lets the log be reopened, not replaced */
	st = NULL;
	log = NULL;
	T_ERR(st_open(sdir, &st), 0, "st_open again");
	T_ERR(head_of(st, &h), 0, "head");
	T_ERR(open_log(st, path, &h, &log), 0, "aud_open with the stored head");
	T_ERR(aud_admin(log, "revoke", "sb", "tty", NULL, NULL), 0, "append");
	T_ERR(aud_flush(log), 0, "flush");
	T_ERR(aud_close(log), 0, "close");
	{
		struct aud_head h2;

		T_ERR(head_of(st, &h2), 0, "head after the restart");
		T_OK(h2.seq > h.seq && memcmp(h2.log_id, h.log_id, 16) == 0, "it moved on, same log");
		T_ERR(st_audit_keyring(st, &akr), 0, "audit keyring");
		T_ERR(aud_verify(path, akr, &h2, &rep), 0, "verifies: %s", rep.what);
		cap_keyring_free(akr);
	}
	unlink(path);
	log = NULL;
	T_ERR(open_log(st, path, &h, &log), CB_EAUDIT, "a deleted log is not silently replaced");
	st_close(st);
	t_rmtmp(dir);
	return t_done();
}
