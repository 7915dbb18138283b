/*
 * cap.c - the capability grammar: parse, print, match and contain.
 *
 * Runs in the broker (trusted) on text that comes from agents and
 * administrators, so every function bounds its work: paths are limited to
 * CAP_STR_MAX bytes and CAP_MAX_COMPONENTS components, and matching is a
 * dynamic programme over components (no exponential backtracking).
 */
#include "caps/caps.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char *const cap_op_names[CAP_OP_COUNT] = {
	[CAP_FS_READ] = "fs.read",
	[CAP_FS_LIST] = "fs.list",
	[CAP_FS_WRITE] = "fs.write",
	[CAP_FS_DELETE] = "fs.delete",
	[CAP_NET_CONNECT] = "net.connect",
	[CAP_PROC_EXEC] = "proc.exec",
};

const char *
cap_op_name(enum cap_op op)
{
	return (unsigned)op < CAP_OP_COUNT ? cap_op_names[op] : "?";
}

int
cap_op_parse(const char *name, size_t len, enum cap_op *out)
{
	for (int i = 0; i < CAP_OP_COUNT; i++) {
		if (strlen(cap_op_names[i]) == len &&
		    memcmp(cap_op_names[i], name, len) == 0) {
			*out = (enum cap_op)i;
			return 0;
		}
	}
	return CB_ECAP_OP;
}

bool
cap_op_is_fs(enum cap_op op)
{
	return op == CAP_FS_READ || op == CAP_FS_LIST || op == CAP_FS_WRITE ||
	    op == CAP_FS_DELETE;
}

/*
 * Characters no capability or path may hold: C0 and DEL, C1 controls
 * (U+0080-009F, which terminals may act on), the line and paragraph
 * separators and the bidirectional overrides and isolates (U+2028-202E,
 * U+2066-2069), which could make a capability shown to an approver read
 * as something else.  Returns the length of such a character at s, or 0.
 */
static size_t
cap_bad_char(const unsigned char *s, size_t n)
{
	if (s[0] < 0x20 || s[0] == 0x7f)
		return 1;
	if (n >= 2 && s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f)
		return 2;
	if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 && s[2] >= 0xa8 && s[2] <= 0xae)
		return 3;
	if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9)
		return 3;
	return 0;
}

static bool
cap_has_bad_char(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (cap_bad_char((const unsigned char *)s + i, n - i))
			return true;
	return false;
}

/* ---- paths and globs ------------------------------------------------ */

struct cap_comp {
	const char *s;
	size_t n;
};

/* Split an absolute path or glob into components.  Rejects what no path
 * we accept may contain; `glob` additionally checks wildcard placement. */
static int
cap_split(const char *p, bool glob, struct cap_comp *comp, size_t *ncomp)
{
	size_t len = strnlen(p, CAP_STR_MAX + 1), n = 0;
	const char *s, *end;

	if (len > CAP_STR_MAX)
		return CB_ECAP_TOOLONG;
	if (p[0] != '/')
		return CB_ECAP_RELATIVE;
	if (cap_has_bad_char(p, len))
		return CB_ECAP_NUL;
	if (len == 1) {
		*ncomp = 0;
		return 0;
	}
	s = p + 1;
	end = p + len;
	for (;;) {
		const char *slash = memchr(s, '/', (size_t)(end - s));
		size_t cn = slash ? (size_t)(slash - s) : (size_t)(end - s);

		if (cn == 0)
			return CB_ECAP_EMPTY;
		if ((cn == 1 && s[0] == '.') || (cn == 2 && s[0] == '.' && s[1] == '.'))
			return CB_ECAP_DOTDOT;
		if (glob && memmem(s, cn, "**", 2) && cn != 2)
			return CB_ECAP_GLOB;
		if (n == CAP_MAX_COMPONENTS)
			return CB_ECAP_TOOLONG;
		comp[n].s = s;
		comp[n].n = cn;
		n++;
		if (!slash)
			break;
		s = slash + 1;
	}
	*ncomp = n;
	return 0;
}

int
cap_path_check(const char *path)
{
	struct cap_comp c[CAP_MAX_COMPONENTS];
	size_t n;

	return cap_split(path, false, c, &n);
}

static bool
cap_is_dstar(const struct cap_comp *c)
{
	return c->n == 2 && c->s[0] == '*' && c->s[1] == '*';
}

/*
 * Wildcard match of one component.  With `inner_glob`, the subject is itself
 * a pattern: its '*' is a symbol that only a '*' of the pattern may consume,
 * which makes the answer "is L(subject) inside L(pattern)" soundly.
 * Classic linear greedy match with one backtrack point.
 */
static bool
cap_comp_match(const struct cap_comp *pat, const struct cap_comp *sub, bool inner_glob)
{
	size_t p = 0, s = 0, star_p = SIZE_MAX, star_s = 0;

	while (s < sub->n) {
		if (p < pat->n && pat->s[p] == '*') {
			star_p = p++;
			star_s = s;
		} else if (p < pat->n && pat->s[p] == sub->s[s] &&
		    !(inner_glob && sub->s[s] == '*')) {
			p++;
			s++;
		} else if (star_p != SIZE_MAX) {
			p = star_p + 1;
			s = ++star_s;
		} else {
			return false;
		}
	}
	while (p < pat->n && pat->s[p] == '*')
		p++;
	return p == pat->n;
}

/*
 * Match component lists.  m[i][j] says whether pat[i..] matches sub[j..];
 * filled backwards so the cost is O(np * ns) component matches.
 */
static bool
cap_comps_match(const struct cap_comp *pat, size_t np, const struct cap_comp *sub,
    size_t ns, bool inner_glob)
{
	static _Thread_local bool m[CAP_MAX_COMPONENTS + 1][CAP_MAX_COMPONENTS + 1];

	for (size_t i = np + 1; i-- > 0;) {
		for (size_t j = ns + 1; j-- > 0;) {
			bool r;

			if (i == np) {
				r = (j == ns);
			} else if (cap_is_dstar(&pat[i])) {
				/* zero components, or consume one and stay */
				r = m[i + 1][j] || (j < ns && m[i][j + 1]);
			} else if (j == ns) {
				r = false;
			} else if (inner_glob && cap_is_dstar(&sub[j])) {
				r = false;	/* only ** covers ** */
			} else {
				r = cap_comp_match(&pat[i], &sub[j], inner_glob) &&
				    m[i + 1][j + 1];
			}
			m[i][j] = r;
		}
	}
	return m[0][0];
}

bool
cap_path_match(const char *glob, const char *path)
{
	struct cap_comp g[CAP_MAX_COMPONENTS], p[CAP_MAX_COMPONENTS];
	size_t ng, np;

	if (cap_split(glob, true, g, &ng) != 0 || cap_split(path, false, p, &np) != 0)
		return false;
	return cap_comps_match(g, ng, p, np, false);
}

bool
cap_path_contains(const char *outer, const char *inner)
{
	struct cap_comp o[CAP_MAX_COMPONENTS], in[CAP_MAX_COMPONENTS];
	size_t no, ni;

	if (cap_split(outer, true, o, &no) != 0 || cap_split(inner, true, in, &ni) != 0)
		return false;
	return cap_comps_match(o, no, in, ni, true);
}

/*
 * Do two component patterns have a string in common?  r[j] (row i) says
 * whether p[i..] and q[j..] can produce a common string; filled backwards
 * two rows at a time, so a pair of 1 KiB components costs 1 MiB steps and
 * 2 KiB of stack.  A '*' on either side may stand for nothing or eat one
 * character the other side produces; two stars together eat nothing new,
 * so that step is never needed.  If the only common string were empty,
 * both are all stars and any character does: never an empty component.
 */
static bool
cap_comp_meet(const struct cap_comp *p, const struct cap_comp *q)
{
	bool rows[2][CAP_STR_MAX + 2];
	bool *next = rows[0], *cur = rows[1];

	for (size_t i = p->n + 1; i-- > 0;) {
		for (size_t j = q->n + 1; j-- > 0;) {
			bool ps = i < p->n && p->s[i] == '*', qs = j < q->n && q->s[j] == '*';
			bool r = false;

			if (i == p->n && j == q->n)
				r = true;
			if (!r && ps)
				r = next[j];			/* p's star: empty */
			if (!r && qs)
				r = cur[j + 1];			/* q's star: empty */
			if (!r && ps && j < q->n && !qs)
				r = cur[j + 1];			/* p's star eats q[j] */
			if (!r && qs && i < p->n && !ps)
				r = next[j];			/* q's star eats p[i] */
			if (!r && i < p->n && j < q->n && !ps && !qs && p->s[i] == q->s[j])
				r = next[j + 1];
			cur[j] = r;
		}
		bool *t = next;

		next = cur;
		cur = t;
	}
	return next[0];
}

/*
 * Is some path matched by both component lists?  The same backwards table
 * as cap_comps_match, symmetric: a "**" on either side may match nothing
 * or take one component the other side names (and stay); two "**" take
 * nothing new together.
 */
static bool
cap_comps_meet(const struct cap_comp *a, size_t na, const struct cap_comp *b, size_t nb)
{
	static _Thread_local bool m[CAP_MAX_COMPONENTS + 1][CAP_MAX_COMPONENTS + 1];

	for (size_t i = na + 1; i-- > 0;) {
		for (size_t j = nb + 1; j-- > 0;) {
			bool ad = i < na && cap_is_dstar(&a[i]), bd = j < nb && cap_is_dstar(&b[j]);
			bool r = i == na && j == nb;

			if (!r && ad)
				r = m[i + 1][j] || (j < nb && !bd && m[i][j + 1]);
			if (!r && bd)
				r = m[i][j + 1] || (i < na && !ad && m[i + 1][j]);
			if (!r && i < na && j < nb && !ad && !bd)
				r = cap_comp_meet(&a[i], &b[j]) && m[i + 1][j + 1];
			m[i][j] = r;
		}
	}
	return m[0][0];
}

bool
cap_path_intersects(const char *a, const char *b)
{
	struct cap_comp ca[CAP_MAX_COMPONENTS], cb[CAP_MAX_COMPONENTS];
	size_t na, nb;

	/* Fails safe: a glob we cannot read meets everything. */
	if (cap_split(a, true, ca, &na) != 0 || cap_split(b, true, cb, &nb) != 0)
		return true;
	return cap_comps_meet(ca, na, cb, nb);
}

int
cap_path_root(const char *glob, char *buf, size_t size)
{
	struct cap_comp c[CAP_MAX_COMPONENTS];
	size_t n, k, len = 1;
	int r;

	if ((r = cap_split(glob, true, c, &n)) != 0)
		return r;
	/* Leading components without a wildcard; a wildcard-free glob names a
	 * single entry, whose parent is the root. */
	for (k = 0; k < n && !memchr(c[k].s, '*', c[k].n); k++)
		;
	if (k == n && n > 0)
		k = n - 1;
	if (size < 2)
		return CB_ETOOBIG;
	buf[0] = '/';
	buf[1] = '\0';
	for (size_t i = 0; i < k; i++) {
		if (len + c[i].n + 2 > size)
			return CB_ETOOBIG;
		if (len > 1)
			buf[len++] = '/';
		memcpy(buf + len, c[i].s, c[i].n);
		len += c[i].n;
		buf[len] = '\0';
	}
	return 0;
}

/* ---- addresses -------------------------------------------------------- */

static void
cap_addr_normalise(struct cap_addr *a)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (a->family == AF_INET6 && memcmp(a->b, mapped, 12) == 0) {
		memmove(a->b, a->b + 12, 4);
		memset(a->b + 4, 0, 12);
		a->family = AF_INET;
	}
}

int
cap_addr_parse(const char *s, struct cap_addr *out)
{
	memset(out, 0, sizeof(*out));
	/* inet_pton(AF_INET) accepts only dotted quads: no octal, hex or
	 * shortened forms that resolvers might read differently. */
	if (inet_pton(AF_INET, s, out->b) == 1) {
		out->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, out->b) == 1) {
		out->family = AF_INET6;
		cap_addr_normalise(out);
		return 0;
	}
	return CB_ECAP_HOST;
}

bool
cap_addr_in(const struct cap_addr *a, const struct cap_addr *net, unsigned prefix)
{
	unsigned bits = a->family == AF_INET ? 32 : 128;

	if (a->family != net->family || prefix > bits)
		return false;
	for (unsigned i = 0; i < prefix / 8; i++)
		if (a->b[i] != net->b[i])
			return false;
	if (prefix % 8) {
		uint8_t mask = (uint8_t)(0xff << (8 - prefix % 8));

		if ((a->b[prefix / 8] & mask) != (net->b[prefix / 8] & mask))
			return false;
	}
	return true;
}

void
cap_addr_format(const struct cap_addr *a, char *buf, size_t size)
{
	if (!inet_ntop(a->family, a->b, buf, (socklen_t)size) && size)
		buf[0] = '\0';
}

/* ---- net.connect resources ------------------------------------------- */

/* A DNS name we accept: LDH labels of 1..63, total <= 253, last label not
 * all digits (so it can never be read as a numeric address). */
static int
cap_name_check(const char *s, size_t n)
{
	size_t lab = 0;
	bool digits = true;

	if (n == 0 || n > 253)
		return CB_ECAP_HOST;
	for (size_t i = 0; i <= n; i++) {
		char c = i < n ? s[i] : '.';

		if (c == '.') {
			if (lab == 0 || lab > 63 || s[i - 1] == '-')
				return CB_ECAP_HOST;
			if (i == n && digits)
				return CB_ECAP_HOST;
			lab = 0;
			digits = true;
			continue;
		}
		if (!(isalnum((unsigned char)c) || c == '-'))
			return CB_ECAP_HOST;
		if (lab == 0 && c == '-')
			return CB_ECAP_HOST;
		if (!isdigit((unsigned char)c))
			digits = false;
		lab++;
	}
	return 0;
}

static int
cap_port_parse(const char *s, int *port)
{
	unsigned long v = 0;

	if (strcmp(s, "*") == 0) {
		*port = -1;
		return 0;
	}
	if (!s[0] || s[0] == '0' || strlen(s) > 5)
		return CB_ECAP_PORT;
	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return CB_ECAP_PORT;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < 1 || v > 65535)
		return CB_ECAP_PORT;
	*port = (int)v;
	return 0;
}

/* "ADDR" or "ADDR/LEN" into addr+prefix; host bits must be zero. */
static int
cap_cidr_parse(char *s, struct cap_addr *a, unsigned *prefix)
{
	char *slash = strchr(s, '/');
	unsigned long len;
	int fam_in;
	unsigned bits, off = 0;
	struct cap_addr masked;

	if (slash)
		*slash = '\0';
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->b) == 1)
		fam_in = AF_INET;
	else if (inet_pton(AF_INET6, s, a->b) == 1)
		fam_in = AF_INET6;
	else
		return CB_ECAP_HOST;
	a->family = fam_in;
	bits = fam_in == AF_INET ? 32 : 128;
	len = bits;
	if (slash) {
		char *e;
		const char *d = slash + 1;

		if (!isdigit((unsigned char)d[0]) || (d[0] == '0' && d[1]) || strlen(d) > 3)
			return CB_ECAP_HOST;
		len = strtoul(d, &e, 10);
		if (*e || len > bits)
			return CB_ECAP_HOST;
	}
	cap_addr_normalise(a);
	if (a->family != fam_in) {	/* ::ffff:a.b.c.d/len */
		if (len < 96)
			return CB_ECAP_HOST;
		off = 96;
	}
	*prefix = (unsigned)len - off;
	masked = *a;
	{
		unsigned abits = a->family == AF_INET ? 32 : 128;

		for (unsigned i = *prefix; i < abits; i++)
			masked.b[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
	}
	if (memcmp(&masked, a, sizeof(masked)) != 0)
		return CB_ECAP_HOST;	/* host bits set: ambiguous */
	return 0;
}

static int
cap_net_parse(const char *res, struct cap_net *net, char *canon, size_t csize)
{
	char buf[CAP_STR_MAX + 1], *host, *port;
	char abuf[INET6_ADDRSTRLEN];
	int r;
	size_t n = strlen(res);

	if (n > CAP_STR_MAX)
		return CB_ECAP_TOOLONG;
	memcpy(buf, res, n + 1);
	memset(net, 0, sizeof(*net));
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');

		if (!close || close[1] != ':')
			return CB_ECAP_HOST;
		*close = '\0';
		host = buf + 1;
		port = close + 2;
		if (!strchr(host, ':'))
			return CB_ECAP_HOST;	/* brackets are for IPv6 */
	} else {
		char *colon = strrchr(buf, ':');

		if (!colon)
			return CB_ECAP_PORT;	/* HOST without :PORT */
		*colon = '\0';
		host = buf;
		port = colon + 1;
		if (strchr(host, ':'))
			return CB_ECAP_HOST;	/* bare IPv6 needs brackets */
	}
	if ((r = cap_port_parse(port, &net->port)) != 0)
		return r;
	if (strcmp(host, "*") == 0) {
		net->kind = CAP_HOST_ANY;
	} else if (host[0] == '*' && host[1] == '.') {
		for (char *p = host; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		if ((r = cap_name_check(host + 2, strlen(host + 2))) != 0)
			return r;
		net->kind = CAP_HOST_WILDCARD;
		memcpy(net->name, host + 2, strlen(host + 2) + 1);	/* <= 253, checked */
	} else if (isdigit((unsigned char)host[0]) || strchr(host, ':')) {
		if ((r = cap_cidr_parse(host, &net->addr, &net->prefix)) != 0)
			return r;
		net->kind = CAP_HOST_IP;
	} else {
		for (char *p = host; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		if ((r = cap_name_check(host, strlen(host))) != 0)
			return r;
		net->kind = CAP_HOST_NAME;
		memcpy(net->name, host, strlen(host) + 1);	/* <= 253, checked */
	}

	/* Canonical text, so equal capabilities print equally. */
	char pbuf[16];

	if (net->port < 0)
		snprintf(pbuf, sizeof(pbuf), "*");
	else
		snprintf(pbuf, sizeof(pbuf), "%d", net->port);
	switch (net->kind) {
	case CAP_HOST_ANY:
		snprintf(canon, csize, "*:%s", pbuf);
		break;
	case CAP_HOST_WILDCARD:
		snprintf(canon, csize, "*.%s:%s", net->name, pbuf);
		break;
	case CAP_HOST_NAME:
		snprintf(canon, csize, "%s:%s", net->name, pbuf);
		break;
	case CAP_HOST_IP: {
		unsigned full = net->addr.family == AF_INET ? 32 : 128;

		cap_addr_format(&net->addr, abuf, sizeof(abuf));
		if (net->addr.family == AF_INET6) {
			if (net->prefix == full)
				snprintf(canon, csize, "[%s]:%s", abuf, pbuf);
			else
				snprintf(canon, csize, "[%s/%u]:%s", abuf, net->prefix, pbuf);
		} else if (net->prefix == full) {
			snprintf(canon, csize, "%s:%s", abuf, pbuf);
		} else {
			snprintf(canon, csize, "%s/%u:%s", abuf, net->prefix, pbuf);
		}
		break;
	}
	}
	return 0;
}

/* ---- capabilities ------------------------------------------------------ */

int
cap_parse(const char *s, struct cap **out)
{
	struct cap *c = NULL;
	const char *colon;
	char canon[CAP_STR_MAX + 64];
	enum cap_op op;
	size_t len;
	int r;

	*out = NULL;
	len = strnlen(s, CAP_STR_MAX + 1);
	if (len > CAP_STR_MAX)
		return CB_ECAP_TOOLONG;
	if (cap_has_bad_char(s, len))
		return CB_ECAP_NUL;
	if (!(colon = strchr(s, ':')))
		return CB_ECAP_SYNTAX;
	if ((r = cap_op_parse(s, (size_t)(colon - s), &op)) != 0)
		return r;
	if (!(c = calloc(1, sizeof(*c))))
		return CB_ENOMEM;
	c->op = op;
	if (op == CAP_NET_CONNECT) {
		char rc[CAP_STR_MAX + 32];

		if ((r = cap_net_parse(colon + 1, &c->net, rc, sizeof(rc))) != 0)
			goto out;
		snprintf(canon, sizeof(canon), "%s:%s", cap_op_name(op), rc);
	} else {
		struct cap_comp comp[CAP_MAX_COMPONENTS];
		size_t n;

		if ((r = cap_split(colon + 1, true, comp, &n)) != 0)
			goto out;
		snprintf(canon, sizeof(canon), "%s:%s", cap_op_name(op), colon + 1);
	}
	if (!(c->text = strdup(canon))) {
		r = CB_ENOMEM;
		goto out;
	}
	c->res = c->text + strlen(cap_op_name(op)) + 1;
	*out = c;
	c = NULL;
	r = 0;
out:
	cap_free(c);
	return r;
}

void
cap_free(struct cap *c)
{
	if (!c)
		return;
	free(c->text);
	free(c);
}

int
cap_dup(const struct cap *c, struct cap **out)
{
	return cap_parse(c->text, out);
}

/* Does request host `h` fall under name pattern? Case-insensitive, an
 * optional trailing dot ignored. */
static bool
cap_host_eq(const char *h, size_t hn, const char *name, size_t nn)
{
	return hn == nn && strncasecmp(h, name, nn) == 0;
}

static bool
cap_net_host_match(const struct cap_net *n, const struct cap_req *r)
{
	const char *h = r->host ? r->host : "";
	size_t hn = strlen(h), dn;
	struct cap_addr lit;

	if (hn && h[hn - 1] == '.')
		hn--;
	switch (n->kind) {
	case CAP_HOST_ANY:
		return true;
	case CAP_HOST_NAME:
		return cap_host_eq(h, hn, n->name, strlen(n->name));
	case CAP_HOST_WILDCARD:
		dn = strlen(n->name);
		/* at least one more label: "x.example.com", never "example.com"
		 * nor "evil-example.com" */
		return hn > dn + 1 && h[hn - dn - 1] == '.' &&
		    strncasecmp(h + hn - dn, n->name, dn) == 0;
	case CAP_HOST_IP:
		if (r->addr)
			return cap_addr_in(r->addr, &n->addr, n->prefix);
		if (r->host && cap_addr_parse(r->host, &lit) == 0)
			return cap_addr_in(&lit, &n->addr, n->prefix);
		return false;
	}
	return false;
}

bool
cap_match(const struct cap *c, const struct cap_req *r)
{
	if (c->op != r->op)
		return false;
	if (c->op == CAP_NET_CONNECT) {
		if (r->port < 1 || r->port > 65535)
			return false;
		if (c->net.port >= 0 && c->net.port != r->port)
			return false;
		/* An IP capability judges the address actually connected to;
		 * a name capability judges the name asked for. */
		if (c->net.kind == CAP_HOST_IP && r->addr)
			return cap_addr_in(r->addr, &c->net.addr, c->net.prefix);
		return cap_net_host_match(&c->net, r);
	}
	return r->path && cap_path_match(c->res, r->path);
}

static bool
cap_net_contains(const struct cap_net *o, const struct cap_net *i)
{
	size_t on, in;

	if (o->port >= 0 && o->port != i->port)
		return false;
	switch (o->kind) {
	case CAP_HOST_ANY:
		return true;
	case CAP_HOST_NAME:
		return i->kind == CAP_HOST_NAME && strcmp(o->name, i->name) == 0;
	case CAP_HOST_WILDCARD:
		if (i->kind != CAP_HOST_NAME && i->kind != CAP_HOST_WILDCARD)
			return false;
		on = strlen(o->name);
		in = strlen(i->name);
		if (i->kind == CAP_HOST_WILDCARD && strcmp(o->name, i->name) == 0)
			return true;
		return in > on + 1 && i->name[in - on - 1] == '.' &&
		    strcmp(i->name + in - on, o->name) == 0;
	case CAP_HOST_IP:
		return i->kind == CAP_HOST_IP && i->prefix >= o->prefix &&
		    cap_addr_in(&i->addr, &o->addr, o->prefix);
	}
	return false;
}

/* Two domains of a name pattern meet when one is the other or beneath it:
 * "*.a.com" and "*.b.a.com" share "x.b.a.com"; "*.a.com" and "*.b.com"
 * share nothing. */
static bool
cap_domain_under(const char *name, const char *dom)
{
	size_t n = strlen(name), d = strlen(dom);

	return n > d + 1 && name[n - d - 1] == '.' && strcmp(name + n - d, dom) == 0;
}

static bool
cap_net_meet(const struct cap_net *a, const struct cap_net *b)
{
	const struct cap_net *t;

	if (a->port >= 0 && b->port >= 0 && a->port != b->port)
		return false;
	if (a->kind == CAP_HOST_ANY || b->kind == CAP_HOST_ANY)
		return true;
	if (a->kind > b->kind) {	/* order the pair: NAME < WILDCARD < IP */
		t = a;
		a = b;
		b = t;
	}
	switch (a->kind) {
	case CAP_HOST_NAME:
		if (b->kind == CAP_HOST_NAME)
			return strcmp(a->name, b->name) == 0;
		if (b->kind == CAP_HOST_WILDCARD)
			return cap_domain_under(a->name, b->name);
		return false;	/* a name and an address: judged at connect time */
	case CAP_HOST_WILDCARD:
		if (b->kind == CAP_HOST_WILDCARD)
			return strcmp(a->name, b->name) == 0 || cap_domain_under(a->name, b->name) ||
			    cap_domain_under(b->name, a->name);
		return false;
	case CAP_HOST_IP:
		/* two ranges overlap iff the wider one holds the other's base */
		return a->addr.family == b->addr.family &&
		    (a->prefix <= b->prefix ? cap_addr_in(&b->addr, &a->addr, a->prefix) :
		    cap_addr_in(&a->addr, &b->addr, b->prefix));
	case CAP_HOST_ANY:
		break;
	}
	return true;
}

bool
cap_intersects(const struct cap *a, const struct cap *b)
{
	if (a->op != b->op)
		return false;
	if (a->op == CAP_NET_CONNECT)
		return cap_net_meet(&a->net, &b->net);
	return cap_path_intersects(a->res, b->res);
}

bool
cap_contains(const struct cap *outer, const struct cap *inner)
{
	if (outer->op != inner->op)
		return false;
	if (outer->op == CAP_NET_CONNECT)
		return cap_net_contains(&outer->net, &inner->net);
	return cap_path_contains(outer->res, inner->res);
}
