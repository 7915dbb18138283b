/*
 * test_caps.c - the capability grammar: parsing, matching, containment.
 */
#include <string.h>

#include "caps/caps.h"
#include "tests/tap.h"

static int
perr(const char *s)
{
	struct cap *c = NULL;
	int r = cap_parse(s, &c);

	cap_free(c);
	return r;
}

static void
canon(const char *in, const char *want)
{
	struct cap *c = NULL;
	int r = cap_parse(in, &c);

	T_OK(r == 0 && strcmp(c->text, want) == 0, "canonical %s -> %s (got %s)", in, want,
	    r == 0 ? c->text : cb_errname(r));
	cap_free(c);
}

static bool
match(const char *cap, const char *path)
{
	struct cap *c = NULL;
	struct cap_req r = { .path = path };
	bool m;

	if (cap_parse(cap, &c) != 0)
		return false;
	r.op = c->op;
	m = cap_match(c, &r);
	cap_free(c);
	return m;
}

static bool
netmatch(const char *cap, const char *host, int port, const char *addr)
{
	struct cap *c = NULL;
	struct cap_addr a;
	struct cap_req r = { .op = CAP_NET_CONNECT, .host = host, .port = port };
	bool m;

	if (cap_parse(cap, &c) != 0)
		return false;
	if (addr) {
		if (cap_addr_parse(addr, &a) != 0) {
			cap_free(c);
			return false;
		}
		r.addr = &a;
	}
	m = cap_match(c, &r);
	cap_free(c);
	return m;
}

static bool
contains(const char *outer, const char *inner)
{
	struct cap *o = NULL, *i = NULL;
	bool r = false;

	if (cap_parse(outer, &o) == 0 && cap_parse(inner, &i) == 0)
		r = cap_contains(o, i);
	cap_free(o);
	cap_free(i);
	return r;
}

static void
test_parse_errors(void)
{
	T_ERR(perr("fs.read:/etc/passwd"), 0, "plain fs.read parses");
	T_ERR(perr("fs.read"), CB_ECAP_SYNTAX, "no colon");
	T_ERR(perr("fs.frobnicate:/x"), CB_ECAP_OP, "unknown op");
	T_ERR(perr("FS.READ:/x"), CB_ECAP_OP, "ops are case-sensitive");
	T_ERR(perr("fs.read:etc/passwd"), CB_ECAP_RELATIVE, "relative path refused");
	T_ERR(perr("fs.read:"), CB_ECAP_RELATIVE, "empty path refused");
	T_ERR(perr("fs.read:/a/../b"), CB_ECAP_DOTDOT, ".. refused");
	T_ERR(perr("fs.read:/a/./b"), CB_ECAP_DOTDOT, ". refused");
	T_ERR(perr("fs.read:/a/.."), CB_ECAP_DOTDOT, "trailing .. refused");
	T_ERR(perr("fs.read://a"), CB_ECAP_EMPTY, "// refused");
	T_ERR(perr("fs.read:/a//b"), CB_ECAP_EMPTY, "inner // refused");
	T_ERR(perr("fs.read:/a/"), CB_ECAP_EMPTY, "trailing slash refused");
	T_ERR(perr("fs.read:/a\nb"), CB_ECAP_NUL, "newline refused");
	T_ERR(perr("fs.read:/a\x7f"), CB_ECAP_NUL, "DEL refused");
	T_ERR(perr("fs.read:/a\xc2\x9b" "2J"), CB_ECAP_NUL, "C1 control (U+009B CSI) refused");
	T_ERR(perr("fs.read:/a\xe2\x80\xae" "txt.exe"), CB_ECAP_NUL, "right-to-left override refused");
	T_ERR(perr("fs.read:/a\xe2\x81\xa6x"), CB_ECAP_NUL, "bidi isolate refused");
	T_ERR(perr("fs.read:/a\xe2\x80\xa8x"), CB_ECAP_NUL, "line separator refused");
	T_ERR(perr("fs.read:/a\xc2\xa0x"), 0, "no-break space (not a control) allowed");
	T_ERR(cap_path_check("/a\xc2\x85"), CB_ECAP_NUL, "a request path with a C1 control refused");
	T_ERR(perr("fs.read:/a**"), CB_ECAP_GLOB, "** inside a component refused");
	T_ERR(perr("fs.read:/***"), CB_ECAP_GLOB, "*** refused");
	T_ERR(perr("fs.read:/"), 0, "root alone parses");
	T_ERR(perr("fs.read:/..."), 0, "... is an ordinary name");
	T_ERR(perr("fs.read:/caf\xc3\xa9/na\xc3\xafve"), 0, "UTF-8 names parse");
	T_ERR(perr("proc.exec:bin/ls"), CB_ECAP_RELATIVE, "proc.exec needs an absolute path");
	T_ERR(perr("proc.exec:/usr/bin/ls"), 0, "proc.exec absolute path");
	{
		char big[CAP_STR_MAX + 32] = "fs.read:";
		size_t n = strlen(big);

		memset(big + n, 'a', sizeof(big) - n - 1);
		big[n] = '/';
		big[sizeof(big) - 1] = '\0';
		T_ERR(perr(big), CB_ECAP_TOOLONG, "over-long capability refused");
	}
	{
		char deep[CAP_STR_MAX] = "fs.read:";

		for (int i = 0; i < CAP_MAX_COMPONENTS + 1; i++)
			strcat(deep, "/a");
		T_ERR(perr(deep), CB_ECAP_TOOLONG, "more than %d components refused",
		    CAP_MAX_COMPONENTS);
	}
	/* network */
	T_ERR(perr("net.connect:example.com:443"), 0, "host:port");
	T_ERR(perr("net.connect:example.com"), CB_ECAP_PORT, "missing port");
	T_ERR(perr("net.connect:example.com:0"), CB_ECAP_PORT, "port 0");
	T_ERR(perr("net.connect:example.com:65536"), CB_ECAP_PORT, "port 65536");
	T_ERR(perr("net.connect:example.com:080"), CB_ECAP_PORT, "leading zero port");
	T_ERR(perr("net.connect:example.com:-1"), CB_ECAP_PORT, "negative port");
	T_ERR(perr("net.connect:exa_mple.com:80"), CB_ECAP_HOST, "underscore in name");
	T_ERR(perr("net.connect:-bad.com:80"), CB_ECAP_HOST, "label starts with -");
	T_ERR(perr("net.connect:bad-.com:80"), CB_ECAP_HOST, "label ends with -");
	T_ERR(perr("net.connect:a..b:80"), CB_ECAP_HOST, "empty label");
	T_ERR(perr("net.connect:1.2.3:80"), CB_ECAP_HOST, "short dotted quad is not a name");
	T_ERR(perr("net.connect:0x7f.1:80"), CB_ECAP_HOST, "hex IPv4 form refused");
	T_ERR(perr("net.connect:2130706433:80"), CB_ECAP_HOST, "integer IPv4 form refused");
	T_ERR(perr("net.connect:010.0.0.1:80"), CB_ECAP_HOST, "octal-looking IPv4 refused");
	T_ERR(perr("net.connect:10.1.2.3/8:80"), CB_ECAP_HOST, "CIDR with host bits refused");
	T_ERR(perr("net.connect:10.0.0.0/33:80"), CB_ECAP_HOST, "prefix > 32 refused");
	T_ERR(perr("net.connect:::1:80"), CB_ECAP_HOST, "bare IPv6 needs brackets");
	T_ERR(perr("net.connect:[::1]:80"), 0, "bracketed IPv6");
	T_ERR(perr("net.connect:[fd00::/8]:*"), 0, "IPv6 CIDR, any port");
	T_ERR(perr("net.connect:[example.com]:80"), CB_ECAP_HOST, "brackets only for IPv6");
	T_ERR(perr("net.connect:*.*.com:80"), CB_ECAP_HOST, "double wildcard refused");
	T_ERR(perr("net.connect:*:*"), 0, "any host any port");
}

static void
test_canonical(void)
{
	canon("net.connect:Example.COM:443", "net.connect:example.com:443");
	canon("net.connect:*.Example.com:*", "net.connect:*.example.com:*");
	canon("net.connect:[::ffff:127.0.0.1]:80", "net.connect:127.0.0.1:80");
	canon("net.connect:[::ffff:10.0.0.0/104]:80", "net.connect:10.0.0.0/8:80");
	canon("net.connect:[2001:DB8::/32]:443", "net.connect:[2001:db8::/32]:443");
	canon("net.connect:10.0.0.1/32:22", "net.connect:10.0.0.1:22");
	canon("fs.read:/a/*/b", "fs.read:/a/*/b");
}

static void
test_match(void)
{
	T_OK(match("fs.read:/a/*", "/a/b"), "/a/* matches /a/b");
	T_OK(!match("fs.read:/a/*", "/a/b/c"), "/a/* does not match /a/b/c");
	T_OK(!match("fs.read:/a/*", "/a"), "/a/* does not match /a");
	T_OK(match("fs.read:/a/**", "/a"), "/a/** matches /a (zero components)");
	T_OK(match("fs.read:/a/**", "/a/b/c/d"), "/a/** matches deep paths");
	T_OK(!match("fs.read:/a/**", "/ab"), "/a/** does not match /ab");
	T_OK(!match("fs.read:/a/**", "/"), "/a/** does not match /");
	T_OK(match("fs.read:/a/**/z", "/a/z"), "/a/**/z matches /a/z");
	T_OK(match("fs.read:/a/**/z", "/a/b/c/z"), "/a/**/z matches /a/b/c/z");
	T_OK(!match("fs.read:/a/**/z", "/a/b/c/zz"), "/a/**/z does not match /a/b/c/zz");
	T_OK(match("fs.read:/a/*.txt", "/a/x.txt"), "*.txt matches x.txt");
	T_OK(match("fs.read:/a/*.txt", "/a/.txt"), "*.txt matches .txt (star may be empty)");
	T_OK(!match("fs.read:/a/*.txt", "/a/x.txt/y"), "*.txt stays in one component");
	T_OK(match("fs.read:/a/*", "/a/.hidden"), "* matches dot-files (documented)");
	T_OK(match("fs.read:/a/x*y*z", "/a/xaaybbz"), "multiple stars in one component");
	T_OK(!match("fs.read:/a/x*y*z", "/a/xaaybb"), "multiple stars need the tail");
	T_OK(match("fs.read:/caf\xc3\xa9/*", "/caf\xc3\xa9/x"), "unicode component matches exactly");
	T_OK(!match("fs.read:/caf\xc3\xa9/*", "/cafe\xcc\x81/x"),
	    "unicode: no normalisation (NFD differs from NFC)");
	T_OK(!match("fs.read:/a/*", "/a/../etc"), "a request with .. never matches");
	T_OK(!match("fs.read:/a/*", "/a//b"), "a request with // never matches");
	T_OK(!match("fs.read:/a/b", "/a/b/"), "a request with trailing slash never matches");
	T_OK(match("fs.read:/**", "/etc/shadow"), "/** matches everything");
	T_OK(match("fs.read:/", "/"), "/ matches /");
	T_OK(!match("fs.read:/", "/a"), "/ matches only /");
	{
		/* a pathological glob finishes (DP, no exponential backtracking) */
		char g[1024] = "fs.read:", p[1024] = "";

		for (int i = 0; i < 30; i++)
			strcat(g, "/**");
		strcat(g, "/z");
		for (int i = 0; i < 60; i++)
			strcat(p, "/a");
		T_OK(!match(g, p), "30 ** components against 60 components terminates");
	}
	T_ERR(cap_path_check("/a/b"), 0, "path check accepts /a/b");
	T_ERR(cap_path_check("/a/b/"), CB_ECAP_EMPTY, "path check refuses trailing slash");
	T_ERR(cap_path_check("a"), CB_ECAP_RELATIVE, "path check refuses relative");
	T_ERR(cap_path_check("/a/../b"), CB_ECAP_DOTDOT, "path check refuses ..");
}

static void
test_root(void)
{
	char b[256];

	T_OK(cap_path_root("/srv/data/**", b, sizeof(b)) == 0 && strcmp(b, "/srv/data") == 0,
	    "root of /srv/data/** is /srv/data");
	T_OK(cap_path_root("/srv/*/x", b, sizeof(b)) == 0 && strcmp(b, "/srv") == 0,
	    "root of /srv/*/x is /srv");
	T_OK(cap_path_root("/etc/hosts", b, sizeof(b)) == 0 && strcmp(b, "/etc") == 0,
	    "root of a plain file is its directory");
	T_OK(cap_path_root("/**", b, sizeof(b)) == 0 && strcmp(b, "/") == 0, "root of /** is /");
	T_OK(cap_path_root("/x", b, sizeof(b)) == 0 && strcmp(b, "/") == 0, "root of /x is /");
	T_ERR(cap_path_root("/srv/data/**", b, 4), CB_ETOOBIG, "short buffer refused");
}

static void
test_net(void)
{
	T_OK(netmatch("net.connect:example.com:443", "example.com", 443, NULL), "exact host");
	T_OK(netmatch("net.connect:example.com:443", "EXAMPLE.com.", 443, NULL),
	    "host match ignores case and a trailing dot");
	T_OK(!netmatch("net.connect:example.com:443", "example.com", 80, NULL), "wrong port");
	T_OK(netmatch("net.connect:*.example.com:443", "www.example.com", 443, NULL),
	    "*.example.com matches www.example.com");
	T_OK(netmatch("net.connect:*.example.com:443", "a.b.example.com", 443, NULL),
	    "*.example.com matches a.b.example.com");
	T_OK(!netmatch("net.connect:*.example.com:443", "example.com", 443, NULL),
	    "*.example.com does not match example.com");
	T_OK(!netmatch("net.connect:*.example.com:443", "evil-example.com", 443, NULL),
	    "*.example.com does not match evil-example.com");
	T_OK(!netmatch("net.connect:*.example.com:443", "example.com.evil.org", 443, NULL),
	    "*.example.com does not match example.com.evil.org");
	T_OK(netmatch("net.connect:10.0.0.0/8:*", "10.255.255.255", 22, NULL), "CIDR upper edge");
	T_OK(!netmatch("net.connect:10.0.0.0/8:*", "11.0.0.0", 22, NULL), "CIDR just past");
	T_OK(!netmatch("net.connect:10.0.0.0/8:*", "9.255.255.255", 22, NULL), "CIDR just before");
	T_OK(netmatch("net.connect:192.168.1.0/31:*", "192.168.1.1", 1, NULL), "/31 both");
	T_OK(!netmatch("net.connect:192.168.1.0/31:*", "192.168.1.2", 1, NULL), "/31 edge");
	T_OK(netmatch("net.connect:0.0.0.0/0:*", "8.8.8.8", 53, NULL), "/0 matches all IPv4");
	T_OK(!netmatch("net.connect:0.0.0.0/0:*", "::1", 53, NULL), "/0 IPv4 not IPv6");
	T_OK(netmatch("net.connect:127.0.0.1:8080", "localhost", 8080, "::ffff:127.0.0.1"),
	    "IPv4-mapped IPv6 address judged as IPv4");
	T_OK(netmatch("net.connect:[::ffff:127.0.0.1]:8080", "x", 8080, "127.0.0.1"),
	    "IPv4-mapped capability matches plain IPv4");
	T_OK(netmatch("net.connect:[2001:db8::/32]:443", "h", 443, "2001:db8:ffff::1"),
	    "IPv6 CIDR match");
	T_OK(!netmatch("net.connect:[2001:db8::/32]:443", "h", 443, "2001:db9::1"),
	    "IPv6 CIDR mismatch");
	T_OK(!netmatch("net.connect:10.0.0.1:80", "example.com", 80, "10.0.0.2"),
	    "IP capability judges the resolved address");
	T_OK(!netmatch("net.connect:example.com:80", "example.org", 80, "1.2.3.4"),
	    "name capability judges the name asked for");
	T_OK(!netmatch("net.connect:*:*", "x", 0, NULL), "port 0 never matches");
	T_OK(netmatch("net.connect:*:*", "anything.example", 1, NULL), "*:* matches any");
}

static void
test_contains(void)
{
	T_OK(contains("fs.read:/a/**", "fs.read:/a/b/c"), "/a/** contains /a/b/c");
	T_OK(contains("fs.read:/a/**", "fs.read:/a"), "/a/** contains /a");
	T_OK(contains("fs.read:/a/**", "fs.read:/a/*/x"), "/a/** contains /a/*/x");
	T_OK(contains("fs.read:/a/**", "fs.read:/a/**"), "/a/** contains itself");
	T_OK(contains("fs.read:/a/**", "fs.read:/a/b/**"), "/a/** contains /a/b/**");
	T_OK(!contains("fs.read:/a/b/**", "fs.read:/a/**"), "/a/b/** does not contain /a/**");
	T_OK(!contains("fs.read:/a/*", "fs.read:/a/b/c"), "/a/* does not contain /a/b/c");
	T_OK(!contains("fs.read:/a/*", "fs.read:/a/**"), "/a/* does not contain /a/**");
	T_OK(contains("fs.read:/a/*", "fs.read:/a/x*"), "/a/* contains /a/x*");
	T_OK(!contains("fs.read:/a/x*", "fs.read:/a/*"), "/a/x* does not contain /a/*");
	T_OK(contains("fs.read:/a/*.txt", "fs.read:/a/b*.txt"), "*.txt contains b*.txt");
	T_OK(!contains("fs.read:/a/*.txt", "fs.read:/a/*"), "*.txt does not contain *");
	T_OK(!contains("fs.read:/a/b", "fs.read:/a/*"), "literal does not contain a glob");
	T_OK(!contains("fs.read:/**", "fs.write:/a"), "different ops never contain");
	T_OK(contains("fs.write:/**", "fs.write:/a/b"), "/** contains all");
	T_OK(!contains("fs.read:/a/**", "fs.read:/ab"), "/a/** does not contain /ab");
	T_OK(contains("net.connect:*:*", "net.connect:example.com:443"), "*:* contains all");
	T_OK(contains("net.connect:*.example.com:443", "net.connect:www.example.com:443"),
	    "wildcard contains a sub-name");
	T_OK(contains("net.connect:*.example.com:443", "net.connect:*.a.example.com:443"),
	    "wildcard contains a deeper wildcard");
	T_OK(!contains("net.connect:*.example.com:443", "net.connect:example.com:443"),
	    "wildcard does not contain its apex");
	T_OK(!contains("net.connect:*.example.com:443", "net.connect:evil-example.com:443"),
	    "wildcard does not contain evil-example.com");
	T_OK(!contains("net.connect:example.com:443", "net.connect:example.com:*"),
	    "one port does not contain any port");
	T_OK(contains("net.connect:example.com:*", "net.connect:example.com:443"),
	    "any port contains one port");
	T_OK(contains("net.connect:10.0.0.0/8:*", "net.connect:10.1.0.0/16:80"),
	    "/8 contains /16 inside it");
	T_OK(!contains("net.connect:10.0.0.0/16:*", "net.connect:10.0.0.0/8:80"),
	    "/16 does not contain /8");
	T_OK(!contains("net.connect:10.0.0.0/8:*", "net.connect:example.com:80"),
	    "CIDR does not contain a name (it could resolve anywhere)");
	T_OK(!contains("net.connect:example.com:*", "net.connect:*:80"),
	    "a name does not contain any-host");
	T_OK(contains("net.connect:127.0.0.1:80", "net.connect:[::ffff:127.0.0.1]:80"),
	    "IPv4 contains its mapped IPv6 form");
	T_OK(contains("proc.exec:/usr/bin/*", "proc.exec:/usr/bin/ls"), "proc.exec glob");
}

static bool
meets(const char *a, const char *b)
{
	struct cap *x = NULL, *y = NULL;
	bool r = false;

	if (cap_parse(a, &x) == 0 && cap_parse(b, &y) == 0)
		r = cap_intersects(x, y);
	cap_free(x);
	cap_free(y);
	return r;
}

/* Issue 10, hole 3: a never rule must be met by every request that shares
 * a path with it, not only by requests it contains. */
static void
test_intersects(void)
{
	T_OK(meets("fs.read:/secret/file", "fs.read:/secret/fil*"), "/secret/file meets /secret/fil*");
	T_OK(!contains("fs.read:/secret/file", "fs.read:/secret/fil*"), "... which it does not contain");
	T_OK(meets("fs.read:/secret/fil*", "fs.read:/secret/file"), "... and symmetrically");
	T_OK(meets("fs.read:/secret/file", "fs.read:/**"), "/secret/file meets /**");
	T_OK(meets("fs.read:/secret/file", "fs.read:/*/file"), "... and /*/file");
	T_OK(meets("fs.read:/secret/file", "fs.read:/s*/**"), "... and /s*/**");
	T_OK(meets("fs.read:/secret/**", "fs.read:/*/x/**"), "/secret/** meets /*/x/**");
	T_OK(meets("fs.read:/a/*b", "fs.read:/a/a*"), "*b meets a* (ab)");
	T_OK(meets("fs.read:/a/x*y*z", "fs.read:/a/*y*"), "x*y*z meets *y*");
	T_OK(meets("fs.read:/a/**/c", "fs.read:/a/b/**"), "/a/**/c meets /a/b/** (/a/b/c)");
	T_OK(meets("fs.read:/a/**", "fs.read:/a"), "/a/** meets /a");
	T_OK(!meets("fs.read:/secret/file", "fs.read:/secret/x*"), "/secret/file misses /secret/x*");
	T_OK(!meets("fs.read:/secret/file", "fs.write:/secret/file"), "different ops never meet");
	T_OK(!meets("fs.read:/a/*b", "fs.read:/a/*c"), "*b misses *c");
	T_OK(!meets("fs.read:/a/*", "fs.read:/a/b/c"), "/a/* misses /a/b/c");
	T_OK(!meets("fs.read:/a/b/**", "fs.read:/a/c/**"), "/a/b/** misses /a/c/**");
	T_OK(!meets("fs.read:/a/**/x", "fs.read:/a/**/y"), "/a/**/x misses /a/**/y");
	T_OK(meets("net.connect:*:*", "net.connect:10.0.0.1:22"), "any host meets an address");
	T_OK(meets("net.connect:10.0.0.0/8:*", "net.connect:10.1.2.3:443"), "a range meets an address in it");
	T_OK(meets("net.connect:10.1.0.0/16:80", "net.connect:10.0.0.0/8:*"), "a /16 meets its /8");
	T_OK(!meets("net.connect:10.0.0.0/8:*", "net.connect:11.0.0.0/8:*"), "disjoint ranges miss");
	T_OK(!meets("net.connect:10.0.0.1:80", "net.connect:10.0.0.1:81"), "different ports miss");
	T_OK(meets("net.connect:*.example.com:443", "net.connect:a.b.example.com:*"), "a name under a wildcard");
	T_OK(meets("net.connect:*.example.com:443", "net.connect:*.b.example.com:443"), "nested wildcards");
	T_OK(!meets("net.connect:*.example.com:443", "net.connect:example.com:443"), "the apex is not under");
	T_OK(!meets("net.connect:*.example.com:443", "net.connect:*.evil-example.com:443"), "unrelated wildcards");
	T_OK(!meets("net.connect:10.0.0.0/8:*", "net.connect:internal.example:443"),
	    "a name and a range: judged per resolved address, not here");
	T_OK(cap_path_intersects("/a", "not a glob"), "an unreadable glob meets everything (fails closed)");

	/* Against brute force: globs over a few component shapes, paths
	 * over a few names; a glob pair meets iff some path matches both. */
	{
		static const char *gc[] = { "a", "b", "*", "a*", "*b", "*a*", "ab", "**" };
		static const char *pc[] = { "a", "b", "ab", "ba", "aa", "bab", "c" };
		enum { NG = 1 + 8 + 64 + 512, NP = 1 + 7 + 49 + 343 + 2401 };
		static char globs[NG][32], paths[NP][32];
		static uint64_t bits[NG][(NP + 63) / 64];
		size_t ng = 0, np = 0, bad = 0, checked = 0;

		for (size_t len = 0; len <= 3; len++) {
			size_t count = 1;

			for (size_t k = 0; k < len; k++)
				count *= 8;
			for (size_t x = 0; x < count; x++) {
				size_t v = x, o = 0;

				globs[ng][0] = '\0';
				for (size_t k = 0; k < len; k++, v /= 8)
					o += (size_t)snprintf(globs[ng] + o, 32 - o, "/%s", gc[v % 8]);
				if (len == 0)
					snprintf(globs[ng], 32, "/");
				ng++;
			}
		}
		for (size_t len = 0; len <= 4; len++) {
			size_t count = 1;

			for (size_t k = 0; k < len; k++)
				count *= 7;
			for (size_t x = 0; x < count; x++) {
				size_t v = x, o = 0;

				paths[np][0] = '\0';
				for (size_t k = 0; k < len; k++, v /= 7)
					o += (size_t)snprintf(paths[np] + o, 32 - o, "/%s", pc[v % 7]);
				if (len == 0)
					snprintf(paths[np], 32, "/");
				np++;
			}
		}
		for (size_t g = 0; g < ng; g++)
			for (size_t q = 0; q < np; q++)
				if (cap_path_match(globs[g], paths[q]))
					bits[g][q / 64] |= 1ull << (q % 64);
		for (size_t g = 0; g < ng; g++) {
			for (size_t h = 0; h < ng; h++) {
				bool witness = false;

				for (size_t w = 0; w < (NP + 63) / 64 && !witness; w++)
					witness = (bits[g][w] & bits[h][w]) != 0;
				if (cap_path_intersects(globs[g], globs[h]) != witness) {
					if (bad++ < 5)
						printf("#   %s and %s: witness %d\n", globs[g], globs[h], witness);
				}
				checked++;
			}
		}
		T_OK(bad == 0, "cap_path_intersects agrees with brute force on %zu glob pairs", checked);
	}
}

int
main(void)
{
	test_parse_errors();
	test_canonical();
	test_match();
	test_root();
	test_net();
	test_contains();
	test_intersects();
	return t_done();
}
