/*
 * test_policy.c - unit tests of policy/: the built-in default, print/load
 * round trips, ceilings, requestable rules, never-reachable addresses and
 * the domain allow list.  (Error classes: test_policy_errors.c.)
 */
#include "policy/policy.h"
#include "policy/pol_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/tap.h"

static char tmpdir[] = "/tmp/cbpolXXXXXX";

static char *
write_file(const char *name, const char *text)
{
	char *path = NULL;
	FILE *f;

	if (asprintf(&path, "%s/%s", tmpdir, name) < 0)
		abort();
	if (!(f = fopen(path, "w")))
		abort();
	fputs(text, f);
	fclose(f);
	return path;
}

static char *
print_str(const struct pol *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f || pol_print(p, f) != 0)
		abort();
	fclose(f);
	return buf;
}

/* Load text as a policy; errors are printed as TAP comments. */
static struct pol *
load_text(const char *text)
{
	static int n;
	char name[32];
	char *path;
	struct pol *p = NULL;

	snprintf(name, sizeof(name), "p%d.conf", n++);
	path = write_file(name, text);
	if (pol_load(path, &p, stdout) != 0)
		p = NULL;
	free(path);
	return p;
}

static struct cap *
C(const char *s)
{
	struct cap *c = NULL;

	if (cap_parse(s, &c) != 0) {
		printf("# cannot parse %s\n", s);
		fflush(stdout);
		abort();
	}
	return c;
}

static bool
within(const struct pol *p, const char *tier, const char *ws, const char *cap)
{
	struct cap *c = C(cap);
	bool r = pol_within_ceiling(pol_tier_get(p, tier), ws, c);

	cap_free(c);
	return r;
}

static int
reqable(const struct pol *p, const char *tier, const char *ws, const char *cap,
    enum pol_approval *mode, uint64_t *ttl)
{
	struct cap *c = C(cap);
	int r = pol_requestable(pol_tier_get(p, tier), ws, c, mode, ttl);

	cap_free(c);
	return r;
}

static void
test_default(void)
{
	struct pol *p = NULL;
	const struct pol_tier *t;
	const struct pol_limits *l;
	const struct pol_bind *b;
	const char *const *ex;

	T_ERR(pol_default(&p), 0, "default policy builds");
	if (!p)
		return;
	T_OK(strcmp(pol_default_tier(p), "low") == 0, "default tier is low");
	T_OK(pol_default_ttl(p) == 3600, "default ttl 3600");
	T_OK(pol_request_expiry(p) == 300, "pending requests expire after 300 s");
	T_OK(pol_audit_fsync(p) == POL_FSYNC_BATCH, "audit fsync batch");
	T_OK(!pol_admin_uid(p, 0) && !pol_admin_uid(p, 1000) && !pol_admin_gid(p, 0),
	    "no admins besides the broker's own user");
	T_OK(pol_tier_count(p) == 3 && pol_tier_get(p, "low") && pol_tier_get(p, "medium") &&
	    pol_tier_get(p, "high"), "three tiers low, medium, high");
	T_OK(pol_tier_get(p, "nosuch") == NULL && pol_tier_at(p, 3) == NULL, "no other tier");
	t = pol_tier_get(p, "low");
	l = pol_tier_limits(t);
	T_OK(l->memory == 512ull << 20 && l->processes == 64 && l->open_files == 256 &&
	    l->file_size == 64ull << 20 && l->cpu == 60 && l->tmp_size == 64ull << 20 && l->wall > 0,
	    "low tier limits");
	T_OK(pol_tier_binds(t, &b) == 0 && pol_tier_exec(t, &ex) == 0, "low: no binds, no exec");
	T_OK(pol_tier_workspace(t) == NULL, "low: no workspace");
	l = pol_tier_limits(pol_tier_get(p, "high"));
	T_OK(l->memory == 8ull << 30, "high tier memory 8G (beyond 32 bits)");
	pol_free(p);
}

static void
test_round_trip(const char *what, struct pol *p)
{
	char *a, *b, *path;
	struct pol *q = NULL;

	if (!T_OK(p != NULL, "%s: loads", what))
		return;
	a = print_str(p);
	path = write_file("rt.conf", a);
	T_ERR(pol_load(path, &q, stdout), 0, "%s: printed form loads", what);
	if (q) {
		b = print_str(q);
		T_OK(strcmp(a, b) == 0, "%s: print -> load -> print is identical", what);
		free(b);
	}
	pol_free(q);
	pol_free(p);
	free(path);
	free(a);
}

/* The shipped example policies: tests/run.sh's 0644 copy (CB_EXAMPLES), or
 * the tree's own when this binary runs alone. */
static const char *
examples_dir(void)
{
	static char buf[4096];
	const char *e = getenv("CB_EXAMPLES"), *top = getenv("CB_TOP");

	if (e && *e)
		return e;
	snprintf(buf, sizeof(buf), "%s/examples/policies", top ? top : ".");
	return buf;
}

static void
test_round_trips(void)
{
	static const char *ex[] = { "system-tools.conf", "assistant.conf", "untrusted.conf" };
	struct pol *p = NULL;

	T_ERR(pol_default(&p), 0, "default for round trip");
	test_round_trip("default", p);
	for (size_t i = 0; i < 3; i++) {
		char *path;

		if (asprintf(&path, "%s/%s", examples_dir(), ex[i]) < 0)
			abort();
		p = NULL;
		T_ERR(pol_load(path, &p, stdout), 0, "example %s loads", ex[i]);
		test_round_trip(ex[i], p);
		free(path);
	}
	/* awkward values survive: sizes that are no unit multiple, big ids */
	test_round_trip("odd values", load_text(
	    "admins = { uids = [ 3000000000L ]; gids = [ 0 ]; };\n"
	    "network = { allow_domains = [ ]; };\n"
	    "tiers = { low = { limits = { memory = 16777217; tmp_size = 5000000000L; }; };\n"
	    "  x = { extends = \"medium\"; workspace = \"/srv/w\"; rw_binds = [ \"/a:/b\" ]; }; };\n"));
}

static void
test_examples(void)
{
	struct pol *p = NULL;
	char *path;
	const struct pol_tier *t;
	const struct pol_bind *b;
	const char *const *ex;
	size_t n_ex;
	enum pol_approval m;
	uint64_t ttl;

	if (asprintf(&path, "%s/assistant.conf", examples_dir()) < 0)
		abort();
	if (pol_load(path, &p, stdout) == 0) {
		t = pol_tier_get(p, "medium");
		T_OK(strcmp(pol_default_tier(p), "medium") == 0, "assistant: default tier medium");
		T_OK(pol_admin_uid(p, 1000) && !pol_admin_uid(p, 1001), "assistant: uid 1000 is admin");
		T_OK(strcmp(pol_tier_workspace(t), "/home/user/project") == 0, "assistant: workspace");
		/* Its old /etc/ssl/certs bind stopped every sandbox (issue 12):
		 * every sandbox sees the certificates already. */
		T_OK(pol_tier_binds(t, &b) == 0, "assistant: no bind (certificates are always there)");
		n_ex = pol_tier_exec(t, &ex);
		T_OK(n_ex > 20 && strcmp(ex[n_ex - 1], "/usr/bin/curl") == 0,
		    "assistant: exec list, the built-in one and curl (%zu)", n_ex);
		T_OK(within(p, "medium", "/w", "net.connect:api.github.com:443"),
		    "assistant: api.github.com:443 within ceiling");
		T_OK(!within(p, "medium", "/w", "net.connect:github.com:22"),
		    "assistant: github.com:22 beyond ceiling");
		T_OK(pol_net_domain_allowed(p, "pypi.org") && !pol_net_domain_allowed(p, "evil.org"),
		    "assistant: domain allow list");
		T_ERR(reqable(p, "medium", "/w", "fs.read:/etc/shadow", &m, &ttl), CB_EPOLICY,
		    "assistant: /etc/shadow never requestable");
		T_ERR(reqable(p, "medium", "/w", "fs.write:/root/.bashrc", &m, &ttl), CB_EPOLICY,
		    "assistant: /root never requestable");
		T_OK(reqable(p, "medium", "/w", "fs.read:/w/src/x.c", &m, &ttl) == 0 &&
		    m == POL_APPROVE_AUTO && ttl == 3600, "assistant: reading the workspace is automatic");
		T_OK(reqable(p, "medium", "/w", "fs.read:/etc/hosts", &m, &ttl) == 0 &&
		    m == POL_APPROVE_HUMAN && ttl == 900, "assistant: reading /etc/hosts needs a human, 900 s");
		T_ERR(reqable(p, "medium", "/w", "net.connect:example.com:80", &m, &ttl), CB_EPOLICY,
		    "assistant: port 80 not requestable");
	}
	pol_free(p);
	free(path);
	p = NULL;
	if (asprintf(&path, "%s/untrusted.conf", examples_dir()) < 0)
		abort();
	if (pol_load(path, &p, stdout) == 0) {
		T_OK(within(p, "low", NULL, "proc.exec:/usr/bin/wc"), "untrusted: wc within ceiling");
		T_OK(!within(p, "low", NULL, "proc.exec:/usr/bin/ls"), "untrusted: ls (default only) not");
		T_ERR(reqable(p, "low", NULL, "fs.read:/tmp/x", &m, &ttl), CB_EPOLICY,
		    "untrusted: nothing requestable");
		T_OK(!pol_net_domain_allowed(p, "example.com"), "untrusted: no domain allowed");
		T_OK(pol_tier_limits(pol_tier_get(p, "low"))->tmp_size == 32u << 20, "untrusted: /tmp 32M");
	}
	pol_free(p);
	free(path);
	p = NULL;
	if (asprintf(&path, "%s/system-tools.conf", examples_dir()) < 0)
		abort();
	if (pol_load(path, &p, stdout) == 0) {
		t = pol_tier_get(p, "nightly");
		T_OK(t && strcmp(pol_tier_base(t), "high") == 0, "system-tools: nightly has high's shape");
		T_OK(strcmp(pol_tier_base(pol_tier_get(p, "medium")), "medium") == 0, "medium is medium");
		T_OK(t && pol_tier_limits(t)->wall == 28800 && pol_tier_limits(t)->memory == 8ull << 30,
		    "system-tools: nightly extends high, overrides wall");
		T_OK(t && within(p, "nightly", NULL, "fs.write:/etc/x"), "system-tools: nightly ceiling from high");
		T_OK(pol_tier_binds(pol_tier_get(p, "high"), &b) == 2 && !b[0].rw && b[1].rw &&
		    strcmp(b[0].src, "/etc") == 0 && strcmp(b[0].dst, "/host/etc") == 0 &&
		    strcmp(b[1].src, "/var/tmp") == 0 && strcmp(b[1].dst, "/reports") == 0,
		    "system-tools: ro bind then rw bind SRC:DST");
		T_OK(pol_admin_gid(p, 27) && pol_admin_uid(p, 0), "system-tools: admins");
	}
	pol_free(p);
	free(path);
}

static void
test_ceilings(void)
{
	struct pol *p = NULL;
	struct pol_inst *pi = NULL;
	const char *ws = "/home/u/proj";

	if (pol_default(&p) != 0)
		abort();
	T_OK(!within(p, "low", NULL, "fs.read:/etc/passwd"), "low refuses fs.read:/etc/passwd");
	T_OK(!within(p, "low", NULL, "fs.read:/tmp/x"), "low refuses host /tmp");
	T_OK(!within(p, "low", NULL, "net.connect:example.com:443"), "low refuses net.connect:example.com:443");
	T_OK(within(p, "low", NULL, "proc.exec:/usr/bin/ls"), "low accepts proc.exec:/usr/bin/ls");
	T_OK(!within(p, "low", NULL, "proc.exec:/usr/bin/python3"), "low refuses proc.exec:/usr/bin/python3");
	T_OK(!within(p, "low", NULL, "proc.exec:/usr/bin/*"), "low refuses proc.exec:/usr/bin/*");

	T_OK(within(p, "medium", ws, "fs.read:/home/u/proj/x"), "medium accepts fs.read:${workspace}/x");
	T_OK(within(p, "medium", ws, "fs.write:/home/u/proj/a/b/c"), "medium accepts fs.write deep in workspace");
	T_OK(within(p, "medium", ws, "fs.delete:/home/u/proj/**"), "medium accepts fs.delete:${workspace}/**");
	T_OK(within(p, "medium", ws, "fs.list:/home/u/proj"), "medium accepts listing the workspace");
	T_OK(!within(p, "medium", ws, "fs.read:/home/u/project2/x"), "medium refuses a sibling with the same prefix");
	T_OK(!within(p, "medium", ws, "fs.read:/home/u/**"), "medium refuses the workspace's parent");
	T_OK(!within(p, "medium", ws, "fs.read:/etc/passwd"), "medium refuses /etc/passwd");
	T_OK(!within(p, "medium", ws, "net.connect:example.com:443"), "medium (default) has no network");
	T_OK(!within(p, "medium", NULL, "fs.read:/home/u/proj/x"), "medium without workspace grants no files");
	T_OK(within(p, "medium", NULL, "proc.exec:/usr/bin/cat"), "medium without workspace keeps its tools");
	T_OK(!within(p, "medium", "/", "fs.read:/etc/passwd"), "workspace / refused");
	T_ERR(pol_tier_instantiate(pol_tier_get(p, "medium"), "/", &pi), CB_EINVAL, "instantiate: / refused");
	T_ERR(pol_tier_instantiate(pol_tier_get(p, "medium"), "rel/dir", &pi), CB_EINVAL, "instantiate: relative refused");
	T_ERR(pol_tier_instantiate(pol_tier_get(p, "medium"), "/a/*", &pi), CB_EINVAL, "instantiate: * refused");
	T_ERR(pol_tier_instantiate(pol_tier_get(p, "medium"), "/a/../b", &pi), CB_EINVAL, "instantiate: .. refused");
	T_ERR(pol_tier_instantiate(pol_tier_get(p, "medium"), ws, &pi), 0, "instantiate medium");
	if (pi) {
		struct cap *c = C("fs.write:/home/u/proj/out.txt");
		size_t n = 0;

		T_OK(pol_inst_within_ceiling(pi, c), "instance: fs.write in workspace");
		T_OK(pol_inst_tier(pi) == pol_tier_get(p, "medium"), "instance: its tier");
		while (pol_inst_ceiling(pi, n))
			n++;
		T_OK(n == 9, "instance: fs.* expands to 4 + 5 tools (%zu)", n);
		T_OK(strcmp(pol_inst_ceiling(pi, 0)->text, "fs.read:/home/u/proj/**") == 0,
		    "instance: ${workspace} substituted");
		cap_free(c);
	}
	pol_inst_free(pi);
	pol_inst_free(NULL);

	T_OK(within(p, "high", NULL, "fs.write:/etc/passwd"), "high accepts fs.write:/etc/passwd");
	T_OK(within(p, "high", NULL, "net.connect:10.0.0.0/8:*"), "high accepts any net.connect");
	T_OK(within(p, "high", NULL, "proc.exec:/usr/sbin/reboot"), "high accepts any proc.exec");
	pol_free(p);
}

static void
test_requestable(void)
{
	struct pol *p = NULL;
	enum pol_approval m;
	uint64_t ttl;

	if (pol_default(&p) != 0)
		abort();
	T_OK(reqable(p, "low", NULL, "fs.read:/etc/hosts", &m, &ttl) == 0 && m == POL_APPROVE_HUMAN &&
	    ttl == 3600, "default: anything requestable by low, human, 3600 s");
	T_OK(reqable(p, "medium", "/w", "net.connect:10.1.2.3:22", &m, &ttl) == 0 && m == POL_APPROVE_HUMAN,
	    "default: net.connect requestable by medium, human");
	T_OK(reqable(p, "high", NULL, "proc.exec:/bin/sh", &m, &ttl) == 0 && m == POL_APPROVE_HUMAN,
	    "default: proc.exec requestable by high, human");
	pol_free(p);

	p = load_text("tiers = { low = { requestable = (\n"
	    "  { caps = [ \"proc.exec:/usr/bin/*\" ]; approval = \"auto\"; max_ttl = 60; },\n"
	    "  { caps = [ \"fs.read:/etc/shadow\" ]; approval = \"never\"; },\n"
	    "  { caps = [ \"fs.read:/etc/**\" ]; approval = \"auto\"; max_ttl = 120; },\n"
	    "  { caps = [ \"net.connect:*.example.com:443\" ]; }\n"
	    "); }; };\n");
	if (!T_OK(p != NULL, "requestable policy loads"))
		return;
	T_OK(reqable(p, "low", NULL, "proc.exec:/usr/bin/ls", &m, &ttl) == 0 && m == POL_APPROVE_AUTO &&
	    ttl == 60, "auto within the ceiling stays auto");
	T_OK(reqable(p, "low", NULL, "proc.exec:/usr/bin/python3", &m, &ttl) == 0 &&
	    m == POL_APPROVE_HUMAN && ttl == 60, "auto beyond the ceiling becomes human");
	m = POL_APPROVE_AUTO;
	T_ERR(reqable(p, "low", NULL, "fs.read:/etc/shadow", &m, &ttl), CB_EPOLICY, "never: refused");
	T_OK(m == POL_APPROVE_NEVER, "never: mode never");
	T_OK(reqable(p, "low", NULL, "fs.read:/etc/hosts", &m, &ttl) == 0 && m == POL_APPROVE_HUMAN &&
	    ttl == 120, "first matching rule decides (auto beyond ceiling -> human)");
	T_OK(reqable(p, "low", NULL, "net.connect:api.example.com:443", &m, &ttl) == 0 &&
	    m == POL_APPROVE_HUMAN && ttl == 3600, "approval defaults to human, max_ttl to 3600");
	T_ERR(reqable(p, "low", NULL, "net.connect:example.com:443", &m, &ttl), CB_EPOLICY,
	    "*.example.com does not cover example.com");
	T_ERR(reqable(p, "low", NULL, "fs.write:/etc/hosts", &m, &ttl), CB_EPOLICY, "unlisted op refused");
	T_ERR(reqable(p, "low", NULL, "fs.read:/home/x", &m, &ttl), CB_EPOLICY, "unlisted path refused");
	T_ERR(reqable(p, "medium", "/w", "fs.read:/etc/hosts", &m, &ttl), 0, "other tiers keep the default");
	pol_free(p);
}

static bool
blocked(const char *addr, const char *granting)
{
	struct cap_addr a;
	struct cap *g = granting ? C(granting) : NULL;
	bool r;

	if (cap_addr_parse(addr, &a) != 0) {
		printf("# cannot parse address %s\n", addr);
		abort();
	}
	r = pol_net_blocked(NULL, &a, g);
	cap_free(g);
	return r;
}

static void
test_net(void)
{
	static const char *never[] = {
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.255",
		"100.100.100.200", "127.0.0.1", "127.255.255.254", "169.254.0.1", "169.254.169.254",
		"172.16.0.1", "172.31.255.255", "192.0.0.170", "192.168.0.1", "192.168.255.255",
		"198.18.0.1", "198.19.255.255", "224.0.0.1", "239.255.255.250", "240.0.0.1",
		"255.255.255.255",
		"::", "::1", "100::1", "fc00::1", "fd00:ec2::254", "fdff::1", "fe80::1", "febf::1",
		"fec0::1", "ff02::1", "ff0e::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101", "64:ff9b:1::1",
		"::ffff:0:7f00:1", "::7f00:1", "::a9fe:a9fe", "2002:7f00:1::1", "2002:a9fe:a9fe::1",
		"2002:a00:1::",
	};
	static const char *reachable[] = {
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "11.0.0.1", "100.63.255.255", "100.128.0.1",
		"172.15.255.255", "172.32.0.1", "192.0.1.1", "192.169.0.1", "198.20.0.1",
		"223.255.255.255", "169.253.255.255",
		"2606:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808",
		"2002:808:808::1", "fbff::1",
	};
	struct pol *p = NULL;
	struct cap_addr a = { .family = 0 };

	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		T_OK(blocked(never[i], NULL), "never reachable: %s", never[i]);
	for (size_t i = 0; i < sizeof(reachable) / sizeof(reachable[0]); i++)
		T_OK(!blocked(reachable[i], NULL), "reachable: %s", reachable[i]);
	T_OK(!blocked("8.8.8.8", "net.connect:*:*"), "reachable with *:*");
	T_OK(pol_net_blocked(NULL, &a, NULL), "unknown family is blocked");

	/* a hand-built IPv4-mapped address (not normalised by cap_addr_parse) */
	memset(&a, 0, sizeof(a));
	a.family = AF_INET6;
	a.b[10] = a.b[11] = 0xff;
	a.b[12] = 127;
	a.b[15] = 1;
	T_OK(pol_net_blocked(NULL, &a, NULL), "un-normalised ::ffff:127.0.0.1 blocked");

	T_OK(!blocked("127.0.0.1", "net.connect:127.0.0.1:8080"), "127.0.0.1 unlocked by naming it");
	T_OK(blocked("127.0.0.2", "net.connect:127.0.0.1:8080"), "127.0.0.2 not unlocked by 127.0.0.1");
	T_OK(!blocked("127.0.0.2", "net.connect:127.0.0.0/8:*"), "127.0.0.0/8 unlocks 127.0.0.2");
	T_OK(blocked("127.0.0.1", "net.connect:*:*"), "*:* does not unlock 127.0.0.1");
	T_OK(blocked("127.0.0.1", "net.connect:0.0.0.0/0:*"), "0.0.0.0/0 does not unlock 127.0.0.1");
	T_OK(blocked("127.0.0.1", "net.connect:64.0.0.0/2:*"), "64.0.0.0/2 does not unlock 127.0.0.1");
	T_OK(blocked("127.0.0.1", "net.connect:localhost:80"), "a name does not unlock its address");
	T_OK(blocked("169.254.169.254", "net.connect:*.amazonaws.com:80"), "metadata stays blocked for names");
	T_OK(!blocked("169.254.169.254", "net.connect:169.254.169.254:80"), "metadata unlocked explicitly");
	T_OK(!blocked("10.1.2.3", "net.connect:10.0.0.0/8:22"), "10.0.0.0/8 unlocks 10.1.2.3");
	T_OK(blocked("10.1.2.3", "net.connect:10.0.0.0/7:22"), "10.0.0.0/7 (wider than 10/8) does not");
	T_OK(blocked("10.0.0.2", "net.connect:10.0.0.1:22"), "10.0.0.1 does not unlock 10.0.0.2");
	T_OK(blocked("192.168.1.1", "net.connect:10.0.0.0/8:22"), "another range is not unlocked");
	T_OK(!blocked("::1", "net.connect:[::1]:80"), "[::1] unlocks ::1");
	T_OK(blocked("::1", "net.connect:[::/0]:80"), "[::/0] does not unlock ::1");
	T_OK(!blocked("::ffff:127.0.0.1", "net.connect:127.0.0.1:80"), "mapped form is the IPv4 address");
	T_OK(!blocked("64:ff9b::7f00:1", "net.connect:[64:ff9b::7f00:1]:80"), "NAT64 form unlocked by naming it");
	T_OK(blocked("64:ff9b::7f00:1", "net.connect:127.0.0.1:80"), "IPv4 name does not unlock its NAT64 form");
	T_OK(blocked("64:ff9b::7f00:1", "net.connect:[64:ff9b::/96]:80"), "whole NAT64 prefix does not unlock");
	T_OK(!blocked("fd00::5", "net.connect:[fd00::/8]:443"), "fd00::/8 unlocks fd00::5");

	T_ERR(pol_default(&p), 0, "default for domains");
	T_OK(pol_net_domain_allowed(p, "anything.example"), "no allow list: every domain");
	pol_free(p);
	p = load_text("network = { allow_domains = [ \"pypi.org\", \"*.python.org\" ]; };\n");
	if (T_OK(p != NULL, "allow list loads")) {
		T_OK(pol_net_domain_allowed(p, "pypi.org"), "allow: pypi.org");
		T_OK(pol_net_domain_allowed(p, "PyPI.org"), "allow: case-insensitive");
		T_OK(pol_net_domain_allowed(p, "docs.python.org"), "allow: docs.python.org by *.python.org");
		T_OK(!pol_net_domain_allowed(p, "python.org"), "deny: python.org (wildcard needs a label)");
		T_OK(!pol_net_domain_allowed(p, "evilpypi.org"), "deny: evilpypi.org");
		T_OK(!pol_net_domain_allowed(p, "pypi.org.evil.com"), "deny: pypi.org.evil.com");
		T_OK(pol_net_domain_allowed(p, "8.8.8.8"), "IP literals are not judged by the domain list");
	}
	pol_free(p);
}

/* Judged with the host's own addresses hosts (comma-separated). */
static bool
blocked_h(const char *addr, const char *granting, const char *hosts)
{
	struct cap_addr a;
	struct pol_net_prefix h[8];
	struct cap *g = granting ? C(granting) : NULL;
	char buf[256], *save = NULL;
	size_t nh = 0;
	bool r;

	/* ADDR (one address) or ADDR/LEN (a local route) */
	snprintf(buf, sizeof(buf), "%s", hosts);
	for (char *t = strtok_r(buf, ",", &save); t && nh < 8; t = strtok_r(NULL, ",", &save)) {
		char *slash = strchr(t, '/');

		if (slash)
			*slash = '\0';
		if (cap_addr_parse(t, &h[nh].a) != 0)
			abort();
		h[nh].prefix = slash ? (unsigned)atoi(slash + 1) : h[nh].a.family == AF_INET ? 32 : 128;
		nh++;
	}
	if (cap_addr_parse(addr, &a) != 0) {
		printf("# cannot parse address %s\n", addr);
		abort();
	}
	r = pol_net_blocked_host(NULL, &a, g, h, nh);
	cap_free(g);
	return r;
}

/* Issue 10, hole 10: the host's own addresses in every spelling, the
 * documentation ranges, and the IPv4 inside Teredo, 6to4 and NAT64. */
static void
test_net_views(void)
{
	/* 11.0.0.7 is a host address here; each spelling reaches it. */
	static const char *host_forms[] = {
		"11.0.0.7", "::ffff:11.0.0.7", "::ffff:0:b00:7", "64:ff9b::b00:7",
		"64:ff9b:1::b00:7", "::b00:7", "2002:b00:7::1", "2002:b00:7:ffff::9",
		"2001:0:b00:7::1",				/* Teredo server */
		"2001:0:4136:e378:8000:63bf:f4ff:fff8",		/* Teredo client ~11.0.0.7 */
		"2606:4700::7",					/* the host's IPv6 address */
	};
	static const char *never[] = {
		"192.0.2.1", "192.0.2.255", "198.51.100.1", "203.0.113.200", "2001:db8::1",
		"2001:db8:ffff::1", "3fff::1", "64:ff9b::c000:201", "2002:c633:6401::",
		"::ffff:203.0.113.9",
		"2001:0:4136:e378:8000:63bf:80ff:fffe",		/* Teredo client 127.0.0.1 */
		"2001:0:4136:e378:8000:63bf:3fff:fdd2",		/* RFC 4380's 192.0.2.45 */
		"2001:0:a9fe:a9fe::f7f7:f7f7",			/* Teredo server 169.254.169.254 */
		"2001:0:a00:1:0:0:f7f7:f7f7",			/* Teredo server 10.0.0.1 */
		"64:ff9b:1::7f00:1",
	};
	static const char *reachable[] = {
		"11.0.0.8", "192.0.3.1", "198.51.101.1", "203.0.114.1", "2001:db9::1",
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7",		/* Teredo 65.54.227.120 / 8.8.8.8 */
		"2002:808:808::1", "64:ff9b::808:808", "2606:4700::8", "::ffff:0:808:808",
	};
	const char *hosts = "11.0.0.7,2606:4700::7";

	for (size_t i = 0; i < sizeof(host_forms) / sizeof(host_forms[0]); i++) {
		T_OK(blocked_h(host_forms[i], NULL, hosts), "host address never reachable: %s", host_forms[i]);
		T_OK(blocked_h(host_forms[i], "net.connect:*:8080", hosts), "*:PORT does not reach %s",
		    host_forms[i]);
	}
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		T_OK(blocked_h(never[i], NULL, hosts), "never reachable: %s", never[i]);
	for (size_t i = 0; i < sizeof(reachable) / sizeof(reachable[0]); i++)
		T_OK(!blocked_h(reachable[i], "net.connect:*:*", hosts), "reachable: %s", reachable[i]);
	T_OK(!blocked("11.0.0.7", NULL), "without host addresses 11.0.0.7 is an ordinary address");

	/* Naming a host address explicitly is honoured; naming a range is not. */
	T_OK(!blocked_h("11.0.0.7", "net.connect:11.0.0.7:8080", hosts), "naming 11.0.0.7 unlocks it");
	T_OK(blocked_h("11.0.0.7", "net.connect:11.0.0.0/8:8080", hosts), "11.0.0.0/8 does not unlock the host");
	T_OK(blocked_h("11.0.0.7", "net.connect:11.0.0.6/31:8080", hosts), "a /31 does not either");
	T_OK(!blocked_h("11.0.0.6", "net.connect:11.0.0.6/31:8080", hosts), "... but reaches its other address");
	T_OK(!blocked_h("10.0.0.5", "net.connect:10.0.0.5:22", "10.0.0.5"), "a host 10.0.0.5 named exactly");
	T_OK(blocked_h("10.0.0.5", "net.connect:10.0.0.0/8:22", "10.0.0.5"),
	    "10.0.0.0/8 unlocks the LAN, not the host's own 10.0.0.5");
	T_OK(!blocked_h("10.0.0.6", "net.connect:10.0.0.0/8:22", "10.0.0.5"), "... and still the LAN");
	T_OK(!blocked_h("2606:4700::7", "net.connect:[2606:4700::7]:443", hosts), "naming the IPv6 host");
	T_OK(blocked_h("2606:4700::7", "net.connect:[2606:4700::/32]:443", hosts), "not its /32");

	/* Red-team F4: a local route (a prefix on lo, AnyIP) makes a whole
	 * prefix the host's own. */
	{
		static const char *const local[] = { "93.184.216.35", "93.184.216.0", "93.184.216.255",
			"::ffff:93.184.216.35", "64:ff9b::5db8:d823", "2002:5db8:d823::1", "::5db8:d823",
			"2606:2800:220:1::99", "2606:2800:220:1:ffff:ffff:ffff:ffff" };
		const char *routes = "93.184.216.34,93.184.216.0/24,2606:2800:220:1::/64";

		for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
			T_OK(blocked_h(local[i], "net.connect:*:*", routes), "a local route's address: %s",
			    local[i]);
		T_OK(!blocked_h("93.184.217.1", "net.connect:*:*", routes), "... not beside it");
		T_OK(!blocked_h("2606:2800:220:2::1", "net.connect:*:*", routes), "... nor beside the IPv6 one");
		T_OK(!blocked_h("93.184.216.35", "net.connect:93.184.216.35:80", routes),
		    "naming the address unlocks it");
		T_OK(!blocked_h("93.184.216.35", "net.connect:93.184.216.0/24:80", routes),
		    "... so does naming the whole local prefix");
		T_OK(blocked_h("93.184.216.34", "net.connect:93.184.216.0/24:80", routes),
		    "... but not the interface address inside it");
		T_OK(blocked_h("93.184.216.35", "net.connect:93.184.0.0/16:80", routes),
		    "... nor a wider range");
		T_OK(blocked_h("1.2.3.4", "net.connect:*:*", "0.0.0.0/0"), "a local default route: everything");
	}
	T_OK(!blocked_h("64:ff9b::b00:7", "net.connect:[64:ff9b::b00:7]:80", hosts),
	    "the NAT64 form unlocked by naming it");
	T_OK(blocked_h("64:ff9b::b00:7", "net.connect:11.0.0.7:80", hosts),
	    "naming 11.0.0.7 does not unlock its NAT64 form");
	T_OK(!blocked_h("2001:0:4136:e378:8000:63bf:f4ff:fff8",
	    "net.connect:[2001:0:4136:e378:8000:63bf:f4ff:fff8]:80", hosts), "a Teredo form named exactly");
	T_OK(blocked_h("2001:0:4136:e378:8000:63bf:f4ff:fff8", "net.connect:[2001::/32]:80", hosts),
	    "the Teredo prefix does not name its client");
	T_OK(!blocked("192.0.2.7", "net.connect:192.0.2.0/24:443"), "the documentation range named");
	T_OK(!blocked("2001:db8::1", "net.connect:[2001:db8::/32]:443"), "2001:db8::/32 named");
	T_OK(blocked("64:ff9b:1::7f00:1", "net.connect:[64:ff9b:1::/48]:80"),
	    "naming local NAT64 does not unlock the loopback inside it");
	T_OK(!blocked("64:ff9b:1::808:808", "net.connect:[64:ff9b:1::/48]:80"),
	    "... but reaches a public address inside it");
	T_OK(blocked_h("::ffff:11.0.0.7", NULL, "::ffff:11.0.0.7"), "a mapped host address is its IPv4");
}

/* Does text load?  Errors (expected here) are not printed. */
static bool
loads_quietly(const char *name, const char *text)
{
	char *path = write_file(name, text);
	struct pol *p = NULL;
	int r = pol_load(path, &p, NULL);

	pol_free(p);
	free(path);
	return r == 0;
}

/* The names the file server may hold for one sandbox. */
static void
test_served_names(void)
{
	struct pol *p = NULL;

	T_ERR(pol_default(&p), 0, "served_names: default policy");
	T_OK(p && pol_served_names(p) == 65536, "served_names: 65536 by default");
	pol_free(p);
	p = load_text("defaults = { served_names = 200; };\n");
	T_OK(p && pol_served_names(p) == 200, "served_names: a file sets it");
	pol_free(p);
	T_OK(!loads_quietly("n0.conf", "defaults = { served_names = 0; };\n"), "served_names: 0 is refused");
	T_OK(!loads_quietly("n1.conf", "defaults = { served_names = 16777217; };\n"),
	    "served_names: more than 16 Mi is refused");
}

/* The slots for trees granted while a sandbox runs. */
static void
test_fs_slots(void)
{
	struct pol *p = NULL;
	char *text;

	T_ERR(pol_default(&p), 0, "fs_slots: default policy");
	T_OK(p && pol_fs_slots(p) == 4, "fs_slots: 4 by default");
	pol_free(p);
	p = load_text("defaults = { fs_slots = 0; };\n");
	T_OK(p && pol_fs_slots(p) == 0, "fs_slots: 0 (no slot) is allowed");
	pol_free(p);
	p = load_text("defaults = { fs_slots = 16; };\n");
	T_OK(p && pol_fs_slots(p) == 16, "fs_slots: 16, the most, is allowed");
	text = p ? print_str(p) : NULL;
	T_OK(text && strstr(text, "  fs_slots = 16;\n"), "fs_slots: printed");
	free(text);
	pol_free(p);
	T_OK(!loads_quietly("s17.conf", "defaults = { fs_slots = 17; };\n"),
	    "fs_slots: more than the stub's 16 is refused");
	T_OK(!loads_quietly("sneg.conf", "defaults = { fs_slots = -1; };\n"), "fs_slots: negative is refused");
	T_OK(!loads_quietly("sstr.conf", "defaults = { fs_slots = \"4\"; };\n"), "fs_slots: a string is refused");
}

/* Issue 10, hole 8: the audit budget's three keys. */
static void
test_audit_budget(void)
{
	struct pol *p = NULL;
	const struct pol_audit_budget *b;

	T_ERR(pol_default(&p), 0, "budget: default policy");
	b = pol_audit_budget(p);
	T_OK(b->rate == 100 && b->burst == 1000 && b->throttle_max == 30,
	    "budget: 100 a second, burst 1000, stopped after 30 s throttled by default");
	pol_free(p);
	p = load_text("defaults = { audit_budget = 5; audit_burst = 7; audit_throttle_max = 2; };\n");
	b = p ? pol_audit_budget(p) : NULL;
	T_OK(b && b->rate == 5 && b->burst == 7 && b->throttle_max == 2, "budget: a file sets all three");
	pol_free(p);
	T_OK(!loads_quietly("b0.conf", "defaults = { audit_budget = 0; };\n"), "budget: 0 is refused");
	T_OK(!loads_quietly("b1.conf", "defaults = { audit_burst = -1; };\n"),
	    "budget: a negative burst is refused");
	T_OK(!loads_quietly("b2.conf", "defaults = { audit_throttle_max = \"30\"; };\n"),
	    "budget: a string is refused");
	/* F5: the bytes of log any operation causes, allowed or denied */
	T_ERR(pol_default(&p), 0, "budget: default policy again");
	b = pol_audit_budget(p);
	T_OK(b->bytes == 1024 * 1024 && b->bytes_burst == 32 * 1024 * 1024,
	    "budget: 1 MiB of log a second, burst 32 MiB by default");
	pol_free(p);
	p = load_text("defaults = { audit_bytes = \"64K\"; audit_bytes_burst = 3000000; };\n");
	b = p ? pol_audit_budget(p) : NULL;
	T_OK(b && b->bytes == 65536 && b->bytes_burst == 3000000 && b->rate == 100,
	    "budget: a file sets the bytes, as a size or a number; the rest stays default");
	pol_free(p);
	T_OK(!loads_quietly("b3.conf", "defaults = { audit_bytes = 0; };\n"),
	    "budget: 0 bytes is refused");
	T_OK(!loads_quietly("b4.conf", "defaults = { audit_bytes_burst = \"-1M\"; };\n"),
	    "budget: a negative byte burst is refused");
}

static bool
has_exec(const struct pol_tier *t, const char *path, size_t *n)
{
	const char *const *ex;
	bool found = false;

	*n = t ? pol_tier_exec(t, &ex) : 0;
	for (size_t i = 0; i < *n; i++)
		found = found || strcmp(ex[i], path) == 0;
	return found;
}

/* exec_add appends to the tier's list, built in or given by exec (in
 * either order in the file); exec alone replaces it. */
static void
test_exec_add(void)
{
	struct pol *p = load_text("tiers = { medium = {} ; };\n");
	size_t n0 = 0, n = 0;
	bool ok, ok2;

	if (T_OK(p != NULL, "a policy that names nothing loads")) {
		ok = has_exec(pol_tier_get(p, "medium"), "/usr/bin/sh", &n0);
		T_OK(ok && n0 > 20, "medium: the built-in exec list (%zu programs)", n0);
	}
	pol_free(p);
	p = load_text("tiers = { medium = { exec_add = [ \"/usr/bin/curl\", \"/usr/bin/sh\" ]; }; };\n");
	if (T_OK(p != NULL, "exec_add loads")) {
		ok = has_exec(pol_tier_get(p, "medium"), "/usr/bin/curl", &n);
		T_OK(ok && n == n0 + 1, "exec_add: curl added, the built-in list kept, sh not twice (%zu)", n);
		T_OK(has_exec(pol_tier_get(p, "medium"), "/usr/bin/cat", &n), "... cat still runs");
	}
	pol_free(p);
	p = load_text("tiers = { medium = { exec_add = [ \"/usr/bin/curl\" ];\n"
	    "  exec = [ \"/usr/bin/python3\" ]; }; };\n");
	if (T_OK(p != NULL, "exec_add written before exec loads")) {
		ok = has_exec(pol_tier_get(p, "medium"), "/usr/bin/curl", &n);
		ok2 = has_exec(pol_tier_get(p, "medium"), "/usr/bin/python3", &n);
		T_OK(ok && ok2 && n == 2, "... and adds to the list exec gives, wherever it is written (%zu)", n);
	}
	pol_free(p);
	p = load_text("tiers = { medium = { exec = [ \"/usr/bin/curl\" ]; }; };\n");
	if (T_OK(p != NULL, "exec alone loads")) {
		ok = has_exec(pol_tier_get(p, "medium"), "/usr/bin/curl", &n);
		T_OK(ok && n == 1, "exec alone replaces the list (%zu)", n);
	}
	pol_free(p);
	/* ceiling_add, the same for the ceiling */
	p = load_text("tiers = { medium = { ceiling_add = [ \"net.connect:pypi.org:443\" ]; }; };\n");
	if (T_OK(p != NULL, "ceiling_add loads")) {
		T_OK(within(p, "medium", "/w", "net.connect:pypi.org:443"), "ceiling_add: the host added");
		T_OK(within(p, "medium", "/w", "fs.write:/w/x") && within(p, "medium", "/w", "proc.exec:/usr/bin/cat"),
		    "... the built-in ceiling kept (the workspace, the tools)");
	}
	pol_free(p);
	p = load_text("tiers = { medium = { ceiling_add = [ \"net.connect:pypi.org:443\" ];\n"
	    "  ceiling = [ \"fs.read:${workspace}/**\" ]; }; };\n");
	if (T_OK(p != NULL, "ceiling_add written before ceiling loads")) {
		T_OK(within(p, "medium", "/w", "net.connect:pypi.org:443") && within(p, "medium", "/w", "fs.read:/w/x") &&
		    !within(p, "medium", "/w", "fs.write:/w/x"), "... and adds to the ceiling given, wherever written");
	}
	pol_free(p);
}

static void
test_overrides(void)
{
	struct pol *p;
	const struct pol_tier *t;

	p = load_text("# a file names only what it changes\n"
	    "tiers = { low = { limits = { memory = \"128M\"; }; };\n"
	    "  ci = { exec = [ \"/usr/bin/make\" ]; };\n"
	    "  build = { extends = \"medium\"; ceiling = [ \"fs.*:/srv/build/**\", \"net.connect:*:*\" ];\n"
	    "    rw_binds = [ \"/var/cache/build\" ]; };\n"
	    "};\n");
	if (!T_OK(p != NULL, "override policy loads"))
		return;
	t = pol_tier_get(p, "low");
	T_OK(pol_tier_limits(t)->memory == 128u << 20 && pol_tier_limits(t)->open_files == 256,
	    "low: memory overridden, open_files kept");
	t = pol_tier_get(p, "ci");
	T_OK(t && pol_tier_limits(t)->memory == 128u << 20, "named tier without extends starts from low");
	T_OK(t && strcmp(pol_tier_base(t), "low") == 0, "named tier without extends has low's shape");
	T_OK(t && within(p, "ci", NULL, "proc.exec:/usr/bin/ls") && !within(p, "ci", NULL, "fs.read:/x"),
	    "ci: low's ceiling");
	t = pol_tier_get(p, "build");
	T_OK(t && pol_tier_limits(t)->memory == 2ull << 30, "build: medium's limits");
	T_OK(t && strcmp(pol_tier_base(t), "medium") == 0, "build: medium's shape");
	T_OK(t && within(p, "build", NULL, "net.connect:10.0.0.1:22"), "build: named tiers have no cap on the ceiling");
	T_OK(t && within(p, "build", NULL, "fs.write:/srv/build/x"), "build: its own files");
	pol_free(p);
	test_exec_add();
}

/* Issue 10, hole 3: never rules win over every request that overlaps
 * them, wherever they stand in the list, and bind the concrete operations
 * of an elevated token. */
static void
test_never_wins(void)
{
	struct pol *p;
	struct pol_inst *pi = NULL;
	enum pol_approval m;
	uint64_t ttl;

	p = load_text("tiers = { low = { requestable = (\n"
	    "  { caps = [ \"fs.read:/secret/file\", \"net.connect:10.0.0.0/8:*\" ]; approval = \"never\"; },\n"
	    "  { caps = [ \"fs.read:/**\", \"net.connect:*:*\" ]; approval = \"human\"; },\n"
	    "  { caps = [ \"fs.list:/**\" ]; approval = \"human\"; },\n"
	    "  { caps = [ \"fs.list:/private/**\" ]; approval = \"never\"; }\n"
	    "); }; };\n");
	if (!T_OK(p != NULL, "never-rule policy loads"))
		return;
	T_ERR(reqable(p, "low", NULL, "fs.read:/secret/fil*", &m, &ttl), CB_EPOLICY,
	    "a request overlapping a never rule is refused (/secret/fil*)");
	T_OK(m == POL_APPROVE_NEVER, "... with mode never");
	T_ERR(reqable(p, "low", NULL, "fs.read:/secret/*", &m, &ttl), CB_EPOLICY, "... /secret/*");
	T_ERR(reqable(p, "low", NULL, "fs.read:/**", &m, &ttl), CB_EPOLICY, "... /**");
	T_ERR(reqable(p, "low", NULL, "fs.read:/*/file", &m, &ttl), CB_EPOLICY, "... /*/file");
	T_ERR(reqable(p, "low", NULL, "fs.read:/secret/file", &m, &ttl), CB_EPOLICY, "... the file itself");
	T_OK(reqable(p, "low", NULL, "fs.read:/secret/other", &m, &ttl) == 0 && m == POL_APPROVE_HUMAN,
	    "a neighbour the never rule does not touch goes to a human");
	T_OK(reqable(p, "low", NULL, "fs.read:/secret/x*", &m, &ttl) == 0 && m == POL_APPROVE_HUMAN,
	    "... so does a glob that cannot reach it");
	T_ERR(reqable(p, "low", NULL, "fs.list:/private/x", &m, &ttl), CB_EPOLICY,
	    "a never rule after a wider human rule still wins");
	T_ERR(reqable(p, "low", NULL, "fs.list:/**", &m, &ttl), CB_EPOLICY, "... against an overlapping glob too");
	T_ERR(reqable(p, "low", NULL, "net.connect:10.0.0.0/16:443", &m, &ttl), CB_EPOLICY,
	    "an address range overlapping a never range is refused");
	T_ERR(reqable(p, "low", NULL, "net.connect:*:443", &m, &ttl), CB_EPOLICY, "... any host too");
	T_OK(reqable(p, "low", NULL, "net.connect:example.com:443", &m, &ttl) == 0,
	    "a name goes to a human (its addresses are judged when it connects)");
	if (T_OK(pol_tier_instantiate(pol_tier_get(p, "low"), NULL, &pi) == 0, "instantiate")) {
		struct cap_addr a10, a11;
		struct cap_req r = { .op = CAP_FS_READ, .path = "/secret/file" };

		T_OK(pol_inst_never_match(pi, &r), "the concrete path /secret/file hits the never rule");
		r.path = "/secret/other";
		T_OK(!pol_inst_never_match(pi, &r), "/secret/other does not");
		/* A never rule for reading also keeps elevated writes from moving
		 * the file, or a directory above it, out from under the rule. */
		r = (struct cap_req){ .op = CAP_FS_WRITE, .path = "/secret/file" };
		T_OK(pol_inst_never_match(pi, &r), "fs.write (rename away, overwrite) of the never file is refused");
		r.path = "/secret";
		T_OK(pol_inst_never_match(pi, &r), "... so is fs.write (rename) of the directory above it");
		r.path = "/";
		T_OK(pol_inst_never_match(pi, &r), "... and of /");
		r.op = CAP_FS_DELETE;
		r.path = "/secret/file";
		T_OK(pol_inst_never_match(pi, &r), "fs.delete of the never file is refused");
		r.op = CAP_FS_WRITE;
		r.path = "/secret/other";
		T_OK(!pol_inst_never_match(pi, &r), "fs.write of a neighbour is not");
		r.path = "/secretive";
		T_OK(!pol_inst_never_match(pi, &r), "... nor of a name that only shares a prefix");
		r.op = CAP_FS_LIST;
		r.path = "/secret/file";
		T_OK(!pol_inst_never_match(pi, &r), "fs.list of it is judged by fs.list never rules only");
		if (cap_addr_parse("10.9.8.7", &a10) != 0 || cap_addr_parse("11.0.0.1", &a11) != 0)
			abort();
		r = (struct cap_req){ .op = CAP_NET_CONNECT, .host = "example.com", .port = 443, .addr = &a10 };
		T_OK(pol_inst_never_match(pi, &r), "a name resolving into a never range hits it");
		r.addr = &a11;
		T_OK(!pol_inst_never_match(pi, &r), "... outside it does not");
		{
			/* 10.9.8.7 in every IPv6 spelling that reaches it */
			static const char *const forms[] = { "64:ff9b::a09:807", "::a09:807",
				"::ffff:10.9.8.7", "::ffff:0:a09:807", "2002:a09:807::1",
				"2001:0:a09:807:0:0:f5f6:f7f8" };
			struct cap_addr v;

			for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
				if (cap_addr_parse(forms[f], &v) != 0)
					abort();
				r = (struct cap_req){ .op = CAP_NET_CONNECT, .host = forms[f], .port = 443,
					.addr = &v };
				T_OK(pol_inst_never_match(pi, &r), "a never range for 10.0.0.0/8 meets %s",
				    forms[f]);
			}
			if (cap_addr_parse("64:ff9b::b00:1", &v) != 0)
				abort();
			r = (struct cap_req){ .op = CAP_NET_CONNECT, .host = "x", .port = 443, .addr = &v };
			T_OK(!pol_inst_never_match(pi, &r), "... and not the NAT64 form of 11.0.0.1");
		}
		pol_inst_free(pi);
	}
	pol_free(p);
}

/* Red-team F1: a never rule meets every spelling of its host.  At request
 * time an address range meets a never range through the IPv6 forms that
 * carry an IPv4 address (both ways); at connect time a never rule naming
 * a host meets that host's resolved addresses, in every view, and a name
 * that could not be resolved refuses every connect its port could match. */
static void
test_never_views_names(void)
{
	struct pol *p;
	struct pol_inst *pi = NULL;
	enum pol_approval m;
	uint64_t ttl;

	p = load_text("tiers = { low = { requestable = (\n"
	    "  { caps = [ \"net.connect:93.184.216.0/24:*\", \"net.connect:[64:ff9b::c633:6407]:*\" ];"
	    " approval = \"never\"; },\n"
	    "  { caps = [ \"net.connect:db.corp.example:5432\", \"net.connect:*.corp.example:22\" ];"
	    " approval = \"never\"; },\n"
	    "  { caps = [ \"net.connect:*:*\" ]; approval = \"human\"; }\n"
	    "); }; };\n");
	if (!T_OK(p != NULL, "never-names policy loads"))
		return;
	{
		static const char *const meets[] = {
			"net.connect:[64:ff9b::5db8:d822]:443", "net.connect:[2002:5db8:d822::/48]:*",
			"net.connect:[::5db8:d822]:443", "net.connect:[::ffff:0:5db8:d822]:443",
			"net.connect:[64:ff9b::/96]:443", "net.connect:[2001::/32]:443",
			"net.connect:[2001:0:5db8:d822::/64]:443", "net.connect:[::/0]:443",
			"net.connect:[2001:0:4136:e378:8000:63bf:a247:27dd]:443",	/* Teredo client ~93.184.216.34 */
			"net.connect:198.51.100.7:80", "net.connect:[2002:c633:6407::]:80",
		};
		static const char *const misses[] = {
			"net.connect:[64:ff9b::808:808]:443", "net.connect:[2002:808:808::/48]:443",
			"net.connect:93.184.217.0/24:443", "net.connect:[64:ff9b::5db8:d900/120]:443",
			"net.connect:198.51.100.8:80",
		};

		for (size_t i = 0; i < sizeof(meets) / sizeof(meets[0]); i++)
			T_ERR(reqable(p, "low", NULL, meets[i], &m, &ttl), CB_EPOLICY,
			    "a request for the never host in another spelling is refused at once: %s", meets[i]);
		for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++)
			T_OK(reqable(p, "low", NULL, misses[i], &m, &ttl) == 0 && m == POL_APPROVE_HUMAN,
			    "... another host goes to a human: %s", misses[i]);
	}
	if (T_OK(pol_tier_instantiate(pol_tier_get(p, "low"), NULL, &pi) == 0, "instantiate")) {
		struct cap_addr db[2], dst;
		struct pol_never_addrs na = { .name = "db.corp.example", .resolved = true, .n = 1, .a = db };
		struct cap_req r = { .op = CAP_NET_CONNECT, .host = "10.1.2.3", .port = 5432, .addr = &dst };
		const struct cap *nc;

		nc = pol_inst_never_name(pi, 0);
		T_OK(nc && strcmp(nc->net.name, "db.corp.example") == 0, "the one never name is listed");
		T_OK(pol_inst_never_name(pi, 1) == NULL, "... and the *.domain never rule is not (no lookup)");
		if (cap_addr_parse("10.1.2.3", &db[0]) != 0 || cap_addr_parse("2606:2800::1", &db[1]) != 0 ||
		    cap_addr_parse("10.1.2.3", &dst) != 0)
			abort();
		T_OK(pol_inst_never_match_net(pi, &r, &na, 1), "the never name's address 10.1.2.3 is refused");
		r.port = 22;
		T_OK(!pol_inst_never_match_net(pi, &r, &na, 1), "... on another port it is not");
		r.port = 5432;
		{
			static const char *const forms[] = { "64:ff9b::a01:203", "::ffff:10.1.2.3",
				"2002:a01:203::1", "::a01:203", "2001:0:4136:e378:8000:63bf:f5fe:fdfc" };

			for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
				if (cap_addr_parse(forms[f], &dst) != 0)
					abort();
				r.host = forms[f];
				T_OK(pol_inst_never_match_net(pi, &r, &na, 1), "... in every spelling: %s", forms[f]);
			}
		}
		if (cap_addr_parse("10.1.2.4", &dst) != 0)
			abort();
		T_OK(!pol_inst_never_match_net(pi, &r, &na, 1), "another address is not refused");
		/* The name has only a NAT64 (DNS64) address: the plain IPv4 is it. */
		if (cap_addr_parse("64:ff9b::a01:204", &db[0]) != 0)
			abort();
		T_OK(pol_inst_never_match_net(pi, &r, &na, 1), "a name known by its NAT64 form meets the IPv4");
		if (cap_addr_parse("2606:2800::1", &dst) != 0)
			abort();
		na.n = 2;
		T_OK(pol_inst_never_match_net(pi, &r, &na, 1), "... and its IPv6 address");
		/* Fail closed: unresolved, or not looked up at all. */
		if (cap_addr_parse("11.1.1.1", &dst) != 0)
			abort();
		T_OK(!pol_inst_never_match_net(pi, &r, &na, 1), "resolved elsewhere: 11.1.1.1 passes");
		na.resolved = false;
		T_OK(pol_inst_never_match_net(pi, &r, &na, 1), "an unresolvable never name refuses the port");
		T_OK(pol_inst_never_match(pi, &r), "... so does one not looked up");
		r.port = 443;
		T_OK(!pol_inst_never_match(pi, &r), "... but not another port");
		/* A never rule written in NAT64 form stops the plain IPv4. */
		if (cap_addr_parse("198.51.100.7", &dst) != 0)
			abort();
		T_OK(pol_inst_never_match(pi, &r), "a NAT64-written never rule stops 198.51.100.7");
		pol_inst_free(pi);
	}
	pol_free(p);
}

static bool
str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool
specv_eq(const struct pol_specv *a, const struct pol_specv *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!str_eq(a->v[i].text, b->v[i].text) || !str_eq(a->v[i].file, b->v[i].file) ||
		    a->v[i].line != b->v[i].line)
			return false;
	return true;
}

/* Every field pol_default_copy fills, against the parse's. */
static bool
tier_eq(const struct pol_tier *a, const struct pol_tier *b)
{
	if (!str_eq(a->name, b->name) || !str_eq(a->extends, b->extends) ||
	    !str_eq(a->base, b->base) || !str_eq(a->workspace, b->workspace) ||
	    !specv_eq(&a->ceiling, &b->ceiling) || a->exec.n != b->exec.n ||
	    a->nbinds != b->nbinds || a->nrules != b->nrules ||
	    memcmp(&a->limits, &b->limits, sizeof(a->limits)) != 0 ||
	    a->fs_cache_data != b->fs_cache_data || a->fs_passthrough != b->fs_passthrough)
		return false;
	for (size_t i = 0; i < a->exec.n; i++)
		if (!str_eq(a->exec.v[i], b->exec.v[i]))
			return false;
	for (size_t i = 0; i < a->nbinds; i++)
		if (!str_eq(a->binds[i].src, b->binds[i].src) ||
		    !str_eq(a->binds[i].dst, b->binds[i].dst) || a->binds[i].rw != b->binds[i].rw)
			return false;
	for (size_t i = 0; i < a->nrules; i++)
		if (!specv_eq(&a->rules[i].caps, &b->rules[i].caps) ||
		    a->rules[i].mode != b->rules[i].mode || a->rules[i].max_ttl != b->rules[i].max_ttl)
			return false;
	return true;
}

/* pol_default() copies the image pol-mkdefault made of the built-in text
 * at build time (policy/mkdefault.c): it must be what parsing the text
 * gives, field by field, and a policy file applied over it must see the
 * same base. */
static void
test_default_image(void)
{
	struct pol *im = NULL, *pa = NULL;
	bool same;

	T_ERR(pol_default(&im), 0, "the built-in policy (image)");
	T_ERR(pol_default_parse(&pa), 0, "the built-in policy (its text parsed)");
	if (!im || !pa) {
		pol_free(im);
		pol_free(pa);
		return;
	}
	same = str_eq(im->default_tier, pa->default_tier) && im->default_ttl == pa->default_ttl &&
	    im->request_expiry == pa->request_expiry && im->fsync == pa->fsync &&
	    memcmp(&im->budget, &pa->budget, sizeof(im->budget)) == 0 &&
	    im->pool_size == pa->pool_size && str_eq(im->cluster, pa->cluster) &&
	    im->cluster_stale == pa->cluster_stale && im->served_names == pa->served_names &&
	    im->fs_slots == pa->fs_slots && im->nuids == pa->nuids && im->ngids == pa->ngids &&
	    (!im->nuids || memcmp(im->uids, pa->uids, im->nuids * sizeof(*im->uids)) == 0) &&
	    (!im->ngids || memcmp(im->gids, pa->gids, im->ngids * sizeof(*im->gids)) == 0) &&
	    im->has_allow == pa->has_allow && im->nallow == pa->nallow && im->ntiers == pa->ntiers;
	T_OK(same, "... the same defaults, admins, network and number of tiers");
	same = im->ntiers == pa->ntiers;
	for (size_t i = 0; same && i < im->ntiers; i++)
		same = tier_eq(im->tiers[i], pa->tiers[i]);
	T_OK(same, "... the same tiers, field by field");
	pol_free(im);
	pol_free(pa);
}

int
main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	test_default();
	test_default_image();
	test_round_trips();
	test_examples();
	test_ceilings();
	test_requestable();
	test_never_wins();
	test_never_views_names();
	test_net();
	test_net_views();
	test_audit_budget();
	test_served_names();
	test_fs_slots();
	test_overrides();
	{
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", tmpdir);
	}
	return t_done();
}
