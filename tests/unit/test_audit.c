/*
 * test_audit.c - the audit log: writing, escaping, reopening, torn-line
 * recovery, and aud_verify catching each kind of tampering and saying where.
 * Test code (trusted); works in a private temporary directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "caps/caps.h"
#include "tests/tap.h"

#include <sodium.h>

static char dir[] = "/tmp/test_audit.XXXXXX";
static struct cap_keyring *kr;
static struct aud_head head;
static bool head_set;

static void
on_cp(void *arg, const uint8_t id[AUD_LOG_ID_LEN], uint64_t seq, const uint8_t hash[AUD_HASH_LEN])
{
	(void)arg;
	memcpy(head.log_id, id, AUD_LOG_ID_LEN);
	head.seq = seq;
	memcpy(head.hash, hash, AUD_HASH_LEN);
	head_set = true;
}

static char *
path_of(const char *name)
{
	static char buf[4][256];
	static int n;
	char *p = buf[n++ % 4];

	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

/* Read a whole file into a malloc'd, NUL-terminated buffer. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	if (b != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	if (b != NULL) {
		b[n] = '\0';
		if (len != NULL)
			*len = (size_t)n;
	}
	fclose(f);
	return b;
}

static void
spit(const char *path, const char *b, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (f == NULL || fwrite(b, 1, n, f) != n)
		abort();
	fclose(f);
}

/* Split into lines (pointers into b, '\n' replaced by NUL). */
static size_t
split(char *b, char **lines, size_t max)
{
	size_t n = 0;
	char *p = b, *nl;

	while (n < max && (nl = strchr(p, '\n')) != NULL) {
		*nl = '\0';
		lines[n++] = p;
		p = nl + 1;
	}
	return n;
}

/* Join lines back with '\n' into path. */
static void
join(const char *path, char **lines, size_t n)
{
	FILE *f = fopen(path, "wb");
	size_t i;

	for (i = 0; i < n; i++)
		fprintf(f, "%s\n", lines[i]);
	fclose(f);
}

static int
verify(const char *path, const struct aud_head *e, struct aud_report *rep)
{
	int rc = aud_verify(path, kr, e, rep);

	printf("# verify %s: %s (%s)\n", strrchr(path, '/') + 1, aud_problem_name(rep->problem),
	    rep->what);
	return rc;
}

/* A log of n records with a checkpoint every 10 lines. */
static void
make_log(const char *path, int n)
{
	struct aud_opts o;
	struct aud_log *log = NULL;
	uint8_t tid[CAP_ID_LEN];
	char res[64];
	int i, bad = 0;

	aud_opts_default(&o);
	o.checkpoint_lines = 10;
	o.on_checkpoint = on_cp;
	unlink(path);
	if (aud_open(path, kr, &o, &log) != 0)
		abort();
	for (i = 0; i < n; i++) {
		struct aud_rec r = { .kind = AUD_OP, .decision = i % 3 ? AUD_ALLOW : AUD_DENY,
			.reason = i % 3 ? 0 : CB_ENOTCOVERED, .sandbox = "sb1", .op = "fs.read",
			.resource = res, .token_id = tid, .actor = "agent" };

		memset(tid, i, sizeof(tid));
		snprintf(res, sizeof(res), "/work/file-%03d.txt", i);
		bad += aud_append(log, &r) != 0;
	}
	if (bad != 0 || aud_close(log) != 0)
		abort();
}

static void
test_basic(void)
{
	struct aud_opts o;
	struct aud_log *log = NULL;
	struct aud_report rep;
	struct aud_stats st;
	const char *p = path_of("basic.jsonl");
	uint8_t tid[CAP_ID_LEN] = { 0xab, 0xcd };
	char *b, cmd[512];
	struct stat sb;
	struct aud_rec r = { .kind = AUD_OP, .decision = AUD_DENY, .reason = CB_EEXPIRED,
		.sandbox = "agent-7", .op = "fs.read",
		.resource = "/tmp/a\"b\\c\nd\x01\xff\xc3\xa9.txt", .token_id = tid,
		.actor = "agent", .detail = "line\r\nbreak" };

	aud_opts_default(&o);
	o.on_checkpoint = on_cp;
	head_set = false;
	T_ERR(aud_open(p, kr, &o, &log), 0, "aud_open creates a new log");
	T_OK(head_set && head.seq == 1, "the genesis checkpoint is reported for the state");
	T_OK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600, "log file mode is 0600");
	T_ERR(aud_append(log, &r), 0, "aud_append queues a hostile record");
	T_ERR(aud_admin(log, "revoke", "agent-7", "uid:0", tid, "by admin"), 0, "aud_admin queues");
	T_ERR(aud_flush(log), 0, "aud_flush");
	b = slurp(p, NULL);
	T_OK(b != NULL && strstr(b, "\"resource\":\"/tmp/a\\\"b\\\\c\\u000ad\\u0001\\udcff\xc3\xa9.txt\"") != NULL,
	    "quotes, backslash, control bytes and invalid UTF-8 are escaped; valid UTF-8 kept");
	T_OK(b != NULL && strstr(b, "\"token\":\"abcd000000000000") != NULL &&
	    strstr(b, "\"decision\":\"deny\",\"reason\":\"expired\"") != NULL,
	    "token id as hex, decision and reason by name");
	T_OK(b != NULL && strstr(b, "\"ev\":\"admin\",\"sandbox\":\"agent-7\",\"op\":\"revoke\"") != NULL,
	    "admin record written");
	free(b);
	aud_stats(log, &st);
	T_OK(st.appended == 2 && st.written == 2 && st.lines == 4, "stats count records and lines");
	{
		struct aud_log *l2 = NULL;

		T_ERR(aud_open(p, kr, &o, &l2), CB_EBUSY, "a second writer on the same log is refused");
		(void)aud_close(l2);
	}
	T_ERR(aud_close(log), 0, "aud_close");
	T_ERR(verify(p, &head, &rep), 0, "fresh log verifies against the remembered head");
	T_OK(rep.lines == 6 && rep.checkpoints == 2 && rep.unsealed == 0,
	    "6 lines, genesis seal and close checkpoint, nothing unsealed");
	snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys\n"
	    "for l in open(sys.argv[1], encoding=\"utf-8\", errors=\"strict\"): json.loads(l)' %s", p);
	T_OK(system(cmd) == 0, "every line is valid UTF-8 JSON (python json.loads)");

	/* reopen continues the chain */
	log = NULL;
	T_ERR(aud_open(p, kr, &o, &log), 0, "aud_open on an existing log");
	T_ERR(aud_admin(log, "kill", "agent-7", "tty", NULL, NULL), 0, "append after reopen");
	T_ERR(aud_close(log), 0, "close again");
	T_ERR(verify(p, &head, &rep), 0, "reopened log verifies");
	b = slurp(p, NULL);
	T_OK(b != NULL && strstr(b, "\"ev\":\"open\"") != NULL && rep.lines == 10,
	    "an open record marks the restart; 10 lines");
	free(b);
}

/* Issue 10, hole 8: a coalesced line carries count, first and last, the
 * chain and the seals still verify, and the line is JSON. */
static void
test_coalesced(void)
{
	struct aud_opts o;
	struct aud_log *log = NULL;
	struct aud_report rep;
	const char *p = path_of("coalesced.jsonl");
	char *b, cmd[512];
	/* 2026-11-28T13:46:20.123Z and 13:46:21.456Z */
	struct aud_rec r = { .kind = AUD_OP, .decision = AUD_DENY, .reason = CB_ENOTOKEN,
		.sandbox = "flood", .op = "fs.read", .resource = "/etc/shadow", .actor = "agent",
		.count = 4999, .first_ns = 1795873580123000000ull, .last_ns = 1795873581456000000ull };

	aud_opts_default(&o);
	o.on_checkpoint = on_cp;
	T_ERR(aud_open(p, kr, &o, &log), 0, "coalesced: open");
	r.count = 0;
	T_ERR(aud_append(log, &r), 0, "the first denial, written as it is");
	r.count = 4999;
	T_ERR(aud_append(log, &r), 0, "the coalesced line");
	T_ERR(aud_close(log), 0, "close");
	b = slurp(p, NULL);
	T_OK(b != NULL && strstr(b, "\"actor\":\"agent\",\"count\":4999,"
	    "\"first\":\"2026-11-28T13:46:20.123Z\",\"last\":\"2026-11-28T13:46:21.456Z\"}") != NULL,
	    "count, first and last close the coalesced line");
	T_OK(b != NULL && strstr(b, "\"resource\":\"/etc/shadow\",\"decision\":\"deny\",\"reason\":"
	    "\"no-token\",\"actor\":\"agent\"}") != NULL, "an ordinary line has no count");
	free(b);
	T_ERR(verify(p, &head, &rep), 0, "a log with a coalesced line verifies");
	snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys\n"
	    "ls=[json.loads(l) for l in open(sys.argv[1])]\n"
	    "sys.exit(0 if [l.get(\"count\") for l in ls if l.get(\"sandbox\")==\"flood\"]==[None,4999] else 1)' %s", p);
	T_OK(system(cmd) == 0, "python json.loads reads count as a number");
}

/* Text no person should be shown raw (zero-width, bidi, tags beyond the
 * BMP) is written as \u escapes, so cat or grep on the log shows it; the
 * text a JSON reader gets is unchanged. */
static void
test_invisible(void)
{
	struct aud_opts o;
	struct aud_log *log = NULL;
	struct aud_report rep;
	const char *p = path_of("invisible.jsonl");
	char *b, cmd[640];
	/* U+200B, U+200F, U+061C, U+FEFF, U+E0041 (a tag), U+2067, then e-acute kept */
	struct aud_rec r = { .kind = AUD_OP, .decision = AUD_DENY, .reason = CB_ENOTOKEN,
		.sandbox = "inv", .op = "fs.read",
		.resource = "/w/a\xe2\x80\x8b" "b\xe2\x80\x8f\xd8\x9c\xef\xbb\xbf\xf3\xa0\x81\x81\xe2\x81\xa7\xc3\xa9",
		.actor = "agent" };

	aud_opts_default(&o);
	o.on_checkpoint = on_cp;
	T_ERR(aud_open(p, kr, &o, &log), 0, "invisible: open");
	T_ERR(aud_append(log, &r), 0, "a record with invisible characters");
	T_ERR(aud_close(log), 0, "close");
	b = slurp(p, NULL);
	T_OK(b != NULL && strstr(b, "\"resource\":\"/w/a\\u200bb\\u200f\\u061c\\ufeff"
	    "\\udb40\\udc41\\u2067\xc3\xa9\"") != NULL,
	    "zero-width, bidi and BOM as \\u escapes, a tag as a surrogate pair, e-acute kept");
	free(b);
	T_ERR(verify(p, &head, &rep), 0, "the log verifies");
	snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys\n"
	    "ls=[json.loads(l) for l in open(sys.argv[1])]\n"
	    "want=\"/w/a\\u200bb\\u200f\\u061c\\ufeff\\U000e0041\\u2067\\u00e9\"\n"
	    "sys.exit(0 if [l[\"resource\"] for l in ls if l.get(\"sandbox\")==\"inv\"]==[want] else 1)' %s", p);
	T_OK(system(cmd) == 0, "a JSON reader gets the same text back");
}

/* The line of the record of sandbox sbx in the log at p (first one), in a
 * malloc'd string without its newline; NULL if none. */
static char *
line_of(const char *p, const char *sbx)
{
	char *b = slurp(p, NULL), *l, *e, want[64], *out = NULL;

	snprintf(want, sizeof(want), "\"sandbox\":\"%s\"", sbx);
	for (l = b; l && *l; l = e + 1) {
		if (!(e = strchr(l, '\n')))
			break;
		if (memmem(l, (size_t)(e - l), want, strlen(want))) {
			out = strndup(l, (size_t)(e - l));
			break;
		}
	}
	free(b);
	return out;
}

/* One line is bounded whatever the agent sends (red-team finding F5): a
 * string whose JSON form would pass AUD_FIELD_MAX is cut at a character,
 * never inside an escape, ends in a marker saying how long it was, and
 * the line says "cut"; aud_rec_cost is never below the line it prices
 * (the audit budget charges it) and not far above. */
static void
test_bounded(void)
{
	struct aud_opts o;
	struct aud_log *log = NULL;
	struct aud_report rep;
	const char *p = path_of("bounded.jsonl");
	static char longp[5001], bad[2001], ok[300];
	char *l, cmd[700];
	struct aud_rec r = { .kind = AUD_OP, .decision = AUD_ALLOW, .sandbox = "long",
		.op = "fs.stat", .resource = longp, .actor = "agent" };
	struct aud_rec rb = { .kind = AUD_OP, .decision = AUD_DENY, .reason = CB_ENOENT,
		.sandbox = "bad", .op = "fs.stat", .resource = bad, .actor = "agent", .detail = bad };
	struct aud_rec rs = { .kind = AUD_OP, .decision = AUD_ALLOW, .sandbox = "short",
		.op = "fs.stat", .resource = ok, .actor = "agent" };
	static const uint8_t tid[CAP_ID_LEN] = { 1, 2, 3 };
	size_t cost;

	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	memset(bad, 0xff, sizeof(bad) - 1);	/* each byte becomes \udcff: 6 bytes */
	memset(ok, 'b', sizeof(ok) - 1);
	ok[0] = '/';
	rs.token_id = tid;
	aud_opts_default(&o);
	o.on_checkpoint = on_cp;
	T_ERR(aud_open(p, kr, &o, &log), 0, "bounded: open");
	T_ERR(aud_append(log, &r), 0, "a record with a 5000-byte path");
	T_ERR(aud_append(log, &rb), 0, "a record with 2000 bytes that are not UTF-8, twice");
	T_ERR(aud_append(log, &rs), 0, "a short record");
	T_ERR(aud_close(log), 0, "close");
	T_ERR(verify(p, &head, &rep), 0, "the log verifies");

	l = line_of(p, "long");
	T_OK(l && strstr(l, "aaaa...[cut: 5000 bytes]\",\"decision\"") && strstr(l, ",\"cut\":true}"),
	    "a 5000-byte path is cut, ends in a marker with its length, and the line says cut");
	T_OK(l && strlen(l) < AUD_FIELD_MAX + 256, "... its line stays short");
	cost = aud_rec_cost(&r);
	T_OK(l && cost >= strlen(l) + 1 && cost <= strlen(l) + 1 + 24,
	    "aud_rec_cost prices it: at least the line and its newline, at most a little more");
	free(l);

	l = line_of(p, "bad");
	T_OK(l && strstr(l, "\\udcff...[cut: 2000 bytes]\"") && strlen(l) < 2 * AUD_FIELD_MAX + 384,
	    "escaped bytes are cut between escapes: the JSON form of each field stays within the bound");
	cost = aud_rec_cost(&rb);
	T_OK(l && cost >= strlen(l) + 1 && cost <= strlen(l) + 1 + 24, "aud_rec_cost prices that too");
	free(l);

	l = line_of(p, "short");
	cost = aud_rec_cost(&rs);
	T_OK(l && !strstr(l, "cut") && cost >= strlen(l) + 1 && cost <= strlen(l) + 1 + 24,
	    "a short line is not cut, and its price is close");
	free(l);
	snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys\n"
	    "ls=[json.loads(l) for l in open(sys.argv[1], errors=\"surrogateescape\")]\n"
	    "r=[l[\"resource\"] for l in ls if l.get(\"sandbox\")==\"long\"][0]\n"
	    "sys.exit(0 if r==\"/\"+\"a\"*(len(r)-len(\"...[cut: 5000 bytes]\")-1)+\"...[cut: 5000 bytes]\" else 1)' %s", p);
	T_OK(system(cmd) == 0, "a JSON reader gets the kept prefix and the marker");
}

static void
test_tamper(void)
{
	const char *p = path_of("chain.jsonl"), *t = path_of("tampered.jsonl");
	struct aud_report rep;
	struct aud_head h;
	char *b, *lines[200], *tmp[201], *cp;
	size_t n, i, len;

	head_set = false;
	make_log(p, 50);
	h = head;
	T_ERR(verify(p, &h, &rep), 0, "50-record log with checkpoints every 10 lines verifies");
	T_OK(rep.checkpoints >= 6, "it has %llu checkpoints", (unsigned long long)rep.checkpoints);
	b = slurp(p, &len);
	n = split(b, lines, 200);

	/* edit one byte of line 5's resource */
	cp = strdup(lines[4]);
	*strstr(cp, "file-") = 'F';
	memcpy(tmp, lines, n * sizeof(*tmp));
	tmp[4] = cp;
	join(t, tmp, n);
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "edited byte detected");
	T_OK(rep.problem == AUD_P_EDITED && rep.line == 5, "... as an edit of line 5 (got line %llu)",
	    (unsigned long long)rep.line);
	free(cp);

	/* delete line 7 */
	memcpy(tmp, lines, 6 * sizeof(*tmp));
	memcpy(tmp + 6, lines + 7, (n - 7) * sizeof(*tmp));
	join(t, tmp, n - 1);
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "deleted line detected");
	T_OK(rep.problem == AUD_P_REMOVED && rep.line == 7, "... as a removal before line 7 (got %s line %llu)",
	    aud_problem_name(rep.problem), (unsigned long long)rep.line);

	/* insert a fabricated line as line 8 */
	memcpy(tmp, lines, 7 * sizeof(*tmp));
	tmp[7] = "{\"prev\":\"0000000000000000000000000000000000000000000000000000000000000000\","
	    "\"seq\":7,\"ts\":\"2026-11-22T13:46:20.123Z\",\"ev\":\"op\",\"op\":\"fs.read\","
	    "\"resource\":\"/etc/shadow\",\"decision\":\"allow\"}";
	memcpy(tmp + 8, lines + 7, (n - 7) * sizeof(*tmp));
	join(t, tmp, n + 1);
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "inserted line detected");
	T_OK(rep.problem == AUD_P_INSERTED && rep.line == 8, "... as an insertion at line 8 (got %s line %llu)",
	    aud_problem_name(rep.problem), (unsigned long long)rep.line);

	/* insert a replayed copy of line 3 as line 13 */
	memcpy(tmp, lines, 12 * sizeof(*tmp));
	tmp[12] = lines[2];
	memcpy(tmp + 13, lines + 12, (n - 12) * sizeof(*tmp));
	join(t, tmp, n + 1);
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "replayed (duplicated) line detected");
	T_OK(rep.problem == AUD_P_INSERTED && rep.line == 13, "... as an insertion at line 13 (got %s line %llu)",
	    aud_problem_name(rep.problem), (unsigned long long)rep.line);

	/* swap lines 20 and 21 */
	memcpy(tmp, lines, n * sizeof(*tmp));
	tmp[19] = lines[20];
	tmp[20] = lines[19];
	join(t, tmp, n);
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "swapped lines detected");
	T_OK(rep.problem == AUD_P_REORDERED && rep.line == 20, "... as reordering at line 20 (got %s line %llu)",
	    aud_problem_name(rep.problem), (unsigned long long)rep.line);

	/* truncate just after a middle checkpoint: self-consistent, but the
	 * state remembers a later checkpoint */
	for (i = n / 2; i < n && strstr(lines[i], "\"ev\":\"checkpoint\"") == NULL; i++)
		;
	join(t, lines, i + 1);
	T_ERR(verify(t, NULL, &rep), 0, "a log truncated after a checkpoint is self-consistent alone");
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "truncation after a checkpoint detected with the state's head");
	T_OK(rep.problem == AUD_P_TRUNCATED, "... as truncation (%s)", aud_problem_name(rep.problem));

	/* a checkpoint's signature altered */
	for (i = 3; i < n && strstr(lines[i], "\"ev\":\"checkpoint\"") == NULL; i++)
		;
	cp = strdup(lines[i]);
	{
		char *s = strstr(cp, "\"sig\":\"") + 7;

		*s = *s == '0' ? '1' : '0';
	}
	memcpy(tmp, lines, n * sizeof(*tmp));
	tmp[i] = cp;
	join(t, tmp, n);
	T_ERR(verify(t, NULL, &rep), CB_EAUDIT, "altered checkpoint signature detected");
	T_OK(rep.problem == AUD_P_BADSIG && rep.line == i + 1, "... as a bad signature at line %zu (got %s line %llu)",
	    i + 1, aud_problem_name(rep.problem), (unsigned long long)rep.line);
	free(cp);

	/* every line removed after the genesis seal (head still remembered) */
	join(t, lines, 2);
	T_ERR(verify(t, &h, &rep), CB_EAUDIT, "log cut back to its genesis detected");

	/* empty file */
	join(t, lines, 0);
	T_ERR(verify(t, NULL, &rep), CB_EAUDIT, "an empty log does not verify");
	free(b);
}

static void
test_replaced(void)
{
	const char *p = path_of("orig.jsonl"), *f = path_of("forged.jsonl");
	struct cap_keyring *other = NULL;
	struct cap_key *k = NULL;
	struct aud_log *log = NULL;
	struct aud_report rep;
	struct aud_head h;
	char *b, *lines[200], *tmp[200];
	size_t n, i;

	make_log(p, 30);
	h = head;
	/* a new, valid log in place of the old one */
	make_log(f, 30);
	T_ERR(verify(f, NULL, &rep), 0, "another genuine log verifies on its own");
	T_ERR(verify(f, &h, &rep), CB_EAUDIT, "... but not as the log the state remembers");
	T_OK(rep.problem == AUD_P_REPLACED && rep.line == 1, "... reported as a replaced file");

	/* a self-consistent chain forged with a key the broker does not have */
	if (cap_keyring_new(&other) != 0 || cap_key_generate(&k) != 0 ||
	    cap_keyring_add(other, k, true) != 0)
		abort();
	unlink(f);
	if (aud_open(f, other, NULL, &log) != 0)
		abort();
	for (i = 0; i < 5; i++)
		if (aud_admin(log, "issue", "sb1", "uid:0", NULL, "forged") != 0)
			abort();
	(void)aud_close(log);
	T_ERR(verify(f, NULL, &rep), CB_EAUDIT, "a chain forged with another key fails");
	T_OK(rep.problem == AUD_P_NOSEAL && rep.line == 2, "... at its genesis seal (line 2)");

	/* the genuine genesis and seal, followed by a forged but perfectly
	 * chained tail with no checkpoints (anyone can compute hashes) */
	b = slurp(p, NULL);
	n = split(b, lines, 200);
	{
		uint8_t hh[32];
		char hex[65], line[512];
		FILE *out = fopen(f, "wb");

		for (i = 0; i < 2; i++)
			fprintf(out, "%s\n", lines[i]);
		crypto_generichash(hh, 32, (const uint8_t *)lines[1], strlen(lines[1]), NULL, 0);
		for (i = 2; i < 10; i++) {
			cap_hex(hh, 32, hex);
			snprintf(line, sizeof(line), "{\"prev\":\"%s\",\"seq\":%zu,\"ts\":"
			    "\"2026-11-22T13:46:20.123Z\",\"ev\":\"op\",\"op\":\"fs.read\"}", hex, i);
			fprintf(out, "%s\n", line);
			crypto_generichash(hh, 32, (const uint8_t *)line, strlen(line), NULL, 0);
		}
		fclose(out);
	}
	T_ERR(verify(f, NULL, &rep), 0, "a forged unsealed tail passes the chain alone ...");
	T_OK(rep.unsealed == 8, "... but verify reports 8 lines no checkpoint covers");
	T_ERR(verify(f, &h, &rep), CB_EAUDIT, "... and fails against the state's head");
	T_OK(rep.problem == AUD_P_TRUNCATED || rep.problem == AUD_P_MISMATCH,
	    "... as truncated or rewritten (%s)", aud_problem_name(rep.problem));
	memcpy(tmp, lines, n * sizeof(*tmp));
	free(b);
	cap_keyring_free(other);
}

static void
test_torn(void)
{
	const char *p = path_of("torn.jsonl");
	struct aud_log *log = NULL;
	struct aud_report rep;
	struct aud_opts o;
	char *b;
	int fd;

	make_log(p, 5);
	fd = open(p, O_WRONLY | O_APPEND);
	T_OK(fd >= 0 && write(fd, "{\"prev\":\"z!z!", 13) == 13, "append a torn fragment");
	close(fd);
	T_ERR(verify(p, &head, &rep), 0, "verify reports a torn tail without calling it tampering");
	T_OK(rep.problem == AUD_P_TORN && rep.line == rep.lines + 1, "... on the last line");
	aud_opts_default(&o);
	o.on_checkpoint = on_cp;
	T_ERR(aud_open(p, kr, &o, &log), 0, "aud_open recovers a torn log");
	T_ERR(aud_admin(log, "issue", "sb", "uid:0", NULL, NULL), 0, "append after recovery");
	T_ERR(aud_close(log), 0, "close");
	T_ERR(verify(p, &head, &rep), 0, "recovered log verifies");
	b = slurp(p, NULL);
	T_OK(b != NULL && strstr(b, "\"ev\":\"recover\"") != NULL &&
	    strstr(b, "cut 13 bytes of a torn last line") != NULL, "a recover record says what was cut");
	T_OK(b != NULL && strstr(b, "z!z!") == NULL, "the fragment is gone");
	free(b);

	/* a crash while creating: only a fragment of the genesis */
	spit(p, "{\"prev\":\"00", 11);
	log = NULL;
	T_ERR(aud_open(p, kr, &o, &log), 0, "a torn genesis starts a new log");
	T_ERR(aud_close(log), 0, "close");
	T_ERR(verify(p, NULL, &rep), 0, "and that log verifies");

	/* a crash between the genesis and its seal */
	{
		char *lines[64];
		char *all = slurp(p, NULL);
		size_t n = split(all, lines, 64);
		FILE *f = fopen(p, "wb");

		T_OK(n >= 2 && f != NULL, "a log to cut");
		fprintf(f, "%s\n%.20s", lines[0], lines[1]);
		fclose(f);
		free(all);
	}
	T_ERR(verify(p, NULL, &rep), CB_EAUDIT, "a genesis followed by a torn seal does not verify");
	T_OK(rep.problem == AUD_P_NOSEAL, "... it is unsealed");
	log = NULL;
	T_ERR(aud_open(p, kr, &o, &log), 0, "aud_open recovers it");
	T_ERR(aud_close(log), 0, "close");
	T_ERR(verify(p, NULL, &rep), 0, "and the recovered log is sealed and verifies");

	/* a file that is not a log is refused, not overwritten */
	spit(p, "hello\nworld\n", 12);
	log = NULL;
	T_ERR(aud_open(p, kr, &o, &log), CB_EAUDIT, "aud_open refuses a file that is not a log");
	b = slurp(p, NULL);
	T_OK(b != NULL && strcmp(b, "hello\nworld\n") == 0, "... and leaves it alone");
	free(b);
}

static void
test_follow(void)
{
	const char *p = path_of("follow.jsonl");
	struct aud_follow *f = NULL;
	struct aud_log *log = NULL;
	const char *line;
	size_t len;
	int n = 0;

	make_log(p, 3);
	T_ERR(aud_follow_open(p, true, &f), 0, "aud_follow_open from the start");
	while (aud_follow_next(f, 0, &line, &len) == 0)
		n++;
	T_OK(n == 7, "follower reads the 7 existing lines (got %d)", n);
	T_ERR(aud_follow_next(f, 50, &line, &len), CB_ETIMEDOUT, "then times out");
	T_ERR(aud_open(p, kr, NULL, &log), 0, "writer reopens");
	T_ERR(aud_admin(log, "approve", "sb", "tty", NULL, "scope=once"), 0, "append");
	T_ERR(aud_flush(log), 0, "flush");
	T_ERR(aud_follow_next(f, 1000, &line, &len), 0, "follower sees a new line");
	T_OK(len > 0 && memmem(line, len, "\"ev\":\"open\"", 11) != NULL, "... the open record");
	T_ERR(aud_follow_next(f, 1000, &line, &len), 0, "and the next");
	T_OK(memmem(line, len, "scope=once", 10) != NULL, "... the approval");
	T_OK(aud_follow_fd(f) >= 0, "an fd for event loops");
	aud_follow_free(f);
	(void)aud_close(log);
}

/* aud_open with the state's head refuses to start over the evidence. */
static void
test_expect(void)
{
	const char *p = path_of("expect.jsonl"), *q = path_of("other.jsonl");
	struct aud_log *log = NULL;
	struct aud_opts o;
	struct aud_head h;
	char *before, *after, *lines[64];
	size_t n;

	make_log(p, 20);
	h = head;
	aud_opts_default(&o);
	o.expect = &h;
	o.on_checkpoint = on_cp;
	T_ERR(aud_open(p, kr, &o, &log), 0, "aud_open accepts the log the state remembers");
	T_ERR(aud_close(log), 0, "close");
	h = head;
	make_log(q, 20);
	before = slurp(q, NULL);
	log = NULL;
	T_ERR(aud_open(q, kr, &o, &log), CB_EAUDIT, "aud_open refuses a log with another id");
	after = slurp(q, NULL);
	T_OK(before != NULL && after != NULL && strcmp(before, after) == 0, "... and leaves it untouched");
	free(before);
	free(after);
	unlink(q);
	T_ERR(aud_open(q, kr, &o, &log), CB_EAUDIT, "aud_open refuses to recreate a deleted log");
	T_OK(access(q, F_OK) != 0, "... and creates nothing");
	before = slurp(p, NULL);
	n = split(before, lines, 64);
	join(q, lines, n / 2);
	T_ERR(aud_open(q, kr, &o, &log), CB_EAUDIT, "aud_open refuses a log cut before the last checkpoint");
	free(before);
}

int
main(void)
{
	struct cap_key *k = NULL;

	if (mkdtemp(dir) == NULL || cap_keyring_new(&kr) != 0 || cap_key_generate(&k) != 0 ||
	    cap_keyring_add(kr, k, true) != 0)
		return 1;
	test_basic();
	test_coalesced();
	test_invisible();
	test_bounded();
	test_tamper();
	test_replaced();
	test_torn();
	test_follow();
	test_expect();
	cap_keyring_free(kr);
	t_rmtmp(dir);
	return t_done();
}
