/*
 * hosts.c - names for the mediated connect(): the sandbox's /etc/hosts,
 * written by the broker, lists exactly the host names its valid
 * net.connect tokens grant, with the addresses the broker looked up for
 * them; a connect() to one of those addresses is judged as a connect to
 * that name.
 *
 * Trust domain: broker.  Why it is safe:
 *  - Only names a valid token grants (inside the ceiling and the policy's
 *    domain allow list) are ever looked up, in a worker thread: an agent
 *    cannot make the broker resolve a name of its choosing here, and
 *    another name resolves inside the sandbox only through the broker's
 *    resolver (dns.c), which looks up names a live token covers and
 *    nothing else (the sandbox's network namespace has no route for a
 *    DNS query of its own).
 *  - The file only helps the agent find an address.  What counts is the
 *    broker's own table: a connect() to an address is judged by
 *    brk_net_check with the name whose lookup gave that address, so the
 *    agent gains nothing by lying to itself, and DNS rebinding after the
 *    lookup cannot move a connection (the broker connects to the address
 *    it judged).
 *  - The directory is in the broker's state (STATE/net/sbx.XXXXXX, holding
 *    nothing but the list; dir 0700 and file 0400, the agent's uid's, so
 *    no other host user reads them), shown read-only in the sandbox
 *    (sandbox-stub: --hosts-fd); a new file replaces the old by rename, so
 *    a reader never sees half of it.
 *  - Revocation and expiry: the set of names is recomputed every second and
 *    the file rewritten when it changed; a connect() is judged against the
 *    live tokens whatever the file says.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/notify.h"
#include "broker/ops.h"
#include "broker/tokens.h"
#include "broker/work.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BRK_HOSTS_NAMES	64	/* names listed per sandbox */
#define BRK_HOSTS_ADDRS	16	/* addresses kept per name */
#define BRK_HOSTS_LEARNED 64	/* names looked up for DNS queries (dns.c), kept */

struct brk_hname {
	char name[254];
	size_t naddr;
	struct cap_addr addr[BRK_HOSTS_ADDRS];
};

struct brk_hosts {
	char dir[4096];
	struct brk_hname *v;		/* the last lookup's results */
	size_t n;
	char *key;			/* the names v was made for, '\n'-joined */
	bool busy, again;		/* a lookup runs; run another after it */
	/* For DNS queries (dns.c), made at the first one: about 34 KiB that a
	 * sandbox never asking a name need not pay for (most of them). */
	struct brk_hname *learned;	/* BRK_HOSTS_LEARNED of them, or NULL */
	uint64_t *learned_ns;		/* mono ns of each lookup; 0: free */
};

struct brk_hjob {
	struct brk_sbx *s;
	struct brk_hname *v;
	size_t n;
	char *key;
};

/* The names s's valid tokens grant now, sorted and unique, '\n'-joined
 * (malloc'd) with the array of them in v (at most BRK_HOSTS_NAMES). */
static char *
brk_hosts_names(struct brk_sbx *s, struct brk_hname **vout, size_t *nout)
{
	struct brk_hname *v = calloc(BRK_HOSTS_NAMES, sizeof(*v));
	size_t n = 0, len = 1;
	char *key;

	*vout = NULL;
	*nout = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < s->nheld; i++) {
		struct brk_held *h = &s->held[i];

		if (brk_tok_check(s, h, NULL, NULL) != 0)
			continue;
		for (size_t j = 0; j < h->tok->c.ncaps && n < BRK_HOSTS_NAMES; j++) {
			const struct cap *c = h->tok->c.caps[j];
			size_t k;

			if (c->op != CAP_NET_CONNECT || c->net.kind != CAP_HOST_NAME ||
			    !(h->in_ceiling & (1u << j)) ||
			    !pol_net_domain_allowed(s->pol->pol, c->net.name))
				continue;
			for (k = 0; k < n && strcmp(v[k].name, c->net.name) < 0; k++)
				;
			if (k < n && strcmp(v[k].name, c->net.name) == 0)
				continue;
			memmove(&v[k + 1], &v[k], (n - k) * sizeof(*v));
			memset(&v[k], 0, sizeof(v[k]));
			snprintf(v[k].name, sizeof(v[k].name), "%s", c->net.name);
			n++;
		}
	}
	for (size_t k = 0; k < n; k++)
		len += strlen(v[k].name) + 1;
	if (!(key = calloc(1, len))) {
		free(v);
		return NULL;
	}
	for (size_t k = 0; k < n; k++) {
		strcat(key, v[k].name);
		strcat(key, "\n");
	}
	*vout = v;
	*nout = n;
	return key;
}

static int brk_hosts_own(int dirfd, const char *path, mode_t mode);

/* Write dir/hosts anew: localhost, then every name's addresses. */
static int
brk_hosts_write(const char *dir, const struct brk_hname *v, size_t n)
{
	char tmp[4200], dst[4200];
	FILE *f;
	int fd, r = 0;

	snprintf(tmp, sizeof(tmp), "%s/hosts.new", dir);
	snprintf(dst, sizeof(dst), "%s/hosts", dir);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return CB_EIO;
	if (brk_hosts_own(fd, "", 0400) != 0 || !(f = fdopen(fd, "w"))) {
		close(fd);
		unlink(tmp);
		return CB_EIO;
	}
	fprintf(f, "# written by capbroker: the names this sandbox's tokens grant\n"
	    "127.0.0.1 localhost\n::1 localhost\n");
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < v[k].naddr; i++) {
			char a[64];

			cap_addr_format(&v[k].addr[i], a, sizeof(a));
			fprintf(f, "%s %s\n", a, v[k].name);
		}
	}
	if (fclose(f) != 0 || rename(tmp, dst) != 0) {
		unlink(tmp);
		r = CB_EIO;
	}
	return r;
}

/* STATE/net: the sandboxes' directories live in the broker's state, so a
 * broker that was killed leaves nothing behind in /tmp: its successor on
 * the same state sweeps them (brk_hosts_sweep), and `run`'s private state
 * goes as a whole. */
static int
brk_hosts_base(const struct brk *b, char *buf, size_t len)
{
	struct stat st;

	if (snprintf(buf, len, "%s/net", b->state_dir) >= (int)len)
		return CB_EINVAL;
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return CB_EIO;
	/* ours, a directory, readable on the way to a bind (never a link) */
	if (lstat(buf, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    chmod(buf, 0700) != 0)
		return CB_EIO;
	return 0;
}

/* Nothing in the state is open to group or others: a sandbox's directory
 * and file are the agent's own instead (a root broker's agent is nobody;
 * an unprivileged broker's is the broker's uid), so it reads them through
 * its read-only view, and no other host user can. */
static int
brk_hosts_own(int dirfd, const char *path, mode_t mode)
{
	if (geteuid() == 0 && fchownat(dirfd, path, SBX_ROOT_AGENT_ID, SBX_ROOT_AGENT_ID,
	    AT_SYMLINK_NOFOLLOW | (path[0] ? 0 : AT_EMPTY_PATH)) != 0)
		return -1;
	return path[0] ? fchmodat(dirfd, path, mode, 0) : fchmod(dirfd, mode);
}

void
brk_hosts_sweep(struct brk *b)
{
	char base[3800], p[4200];
	struct dirent *e;
	DIR *d;

	if (brk_hosts_base(b, base, sizeof(base)) != 0 || !(d = opendir(base)))
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "sbx.", 4) != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s/hosts", base, e->d_name);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s/hosts.new", base, e->d_name);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s", base, e->d_name);
		rmdir(p);
	}
	closedir(d);
}

int
brk_hosts_open(struct brk_sbx *s, const char **dir)
{
	struct brk_hosts *h = calloc(1, sizeof(*h));
	char base[3800];

	*dir = NULL;
	if (!h)
		return CB_ENOMEM;
	if (brk_hosts_base(s->b, base, sizeof(base)) != 0) {
		free(h);
		return CB_EIO;
	}
	snprintf(h->dir, sizeof(h->dir), "%s/sbx.XXXXXX", base);
	/* readable by the agent's uid (nobody, under a root broker) */
	if (!mkdtemp(h->dir)) {
		free(h);
		return CB_EIO;
	}
	if (brk_hosts_own(AT_FDCWD, h->dir, 0700) != 0 || brk_hosts_write(h->dir, NULL, 0) != 0) {
		char p[4200];

		snprintf(p, sizeof(p), "%s/hosts", h->dir);
		unlink(p);
		rmdir(h->dir);
		free(h);
		return CB_EIO;
	}
	s->hosts = h;
	*dir = h->dir;
	return 0;
}

static void
brk_hosts_lookup(void *arg)
{
	struct brk_hjob *j = arg;

	for (size_t k = 0; k < j->n; k++) {
		int gai;

		j->v[k].naddr = brk_net_lookup(j->v[k].name, j->v[k].addr, BRK_HOSTS_ADDRS, &gai);
	}
}

static void
brk_hosts_looked_up(void *arg)
{
	struct brk_hjob *j = arg;
	struct brk_sbx *s = j->s;
	struct brk_hosts *h = s->hosts;

	if (h && !s->dead) {
		h->busy = false;
		free(h->v);
		free(h->key);
		h->v = j->v;
		h->n = j->n;
		h->key = j->key;
		j->v = NULL;
		j->key = NULL;
		/* Kept until the next change: only the names found, not the
		 * BRK_HOSTS_NAMES the lookup had room for (32 KiB). */
		if (h->n == 0) {
			free(h->v);
			h->v = NULL;
		} else {
			struct brk_hname *v = realloc(h->v, h->n * sizeof(*h->v));

			if (v)
				h->v = v;
		}
		if (brk_hosts_write(h->dir, h->v, h->n) != 0)
			brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = CB_EIO,
			    .sandbox = s->id, .op = "hosts", .resource = h->dir, .actor = "broker",
			    .detail = "the sandbox's /etc/hosts could not be rewritten" });
		if (h->again) {
			h->again = false;
			brk_hosts_refresh(s);
		}
	}
	free(j->v);
	free(j->key);
	free(j);
	brk_sbx_release(s);
}

void
brk_hosts_refresh(struct brk_sbx *s)
{
	struct brk_hosts *h = s->hosts;
	struct brk_hjob *j;
	struct brk_hname *v;
	size_t n;
	char *key;

	if (!h || s->dead)
		return;
	if (h->busy) {
		h->again = true;
		return;
	}
	if (!(key = brk_hosts_names(s, &v, &n)))
		return;
	if (h->key && strcmp(h->key, key) == 0) {
		free(key);
		free(v);
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		free(key);
		free(v);
		return;
	}
	*j = (struct brk_hjob){ .s = s, .v = v, .n = n, .key = key };
	brk_sbx_hold(s);
	h->busy = true;
	if (n == 0) {
		/* nothing to look up */
		brk_hosts_looked_up(j);
		return;
	}
	if (brk_work(s->b, brk_hosts_lookup, brk_hosts_looked_up, j) != 0) {
		h->busy = false;
		free(key);
		free(v);
		free(j);
		brk_sbx_release(s);
	}
}

void
brk_hosts_close(struct brk_sbx *s)
{
	struct brk_hosts *h = s->hosts;
	char p[4200];

	if (!h)
		return;
	snprintf(p, sizeof(p), "%s/hosts", h->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/hosts.new", h->dir);
	unlink(p);
	rmdir(h->dir);
	free(h->v);
	free(h->key);
	free(h->learned);
	free(h->learned_ns);
	free(h);
	s->hosts = NULL;
}

/* The learned slot for name, or (make) the free or oldest one. */
static size_t
brk_hosts_slot(const struct brk_hosts *h, const char *name, bool *found)
{
	size_t best = 0;

	*found = false;
	for (size_t k = 0; k < BRK_HOSTS_LEARNED; k++) {
		if (h->learned_ns[k] && strcmp(h->learned[k].name, name) == 0) {
			*found = true;
			return k;
		}
		if (h->learned_ns[k] < h->learned_ns[best])
			best = k;
	}
	return best;
}

void
brk_hosts_learn(struct brk_sbx *s, const char *name, const struct cap_addr *a, size_t n)
{
	struct brk_hosts *h = s->hosts;
	bool found;
	size_t k;

	if (!h)
		return;
	if (!h->learned) {
		h->learned = calloc(BRK_HOSTS_LEARNED, sizeof(*h->learned));
		h->learned_ns = calloc(BRK_HOSTS_LEARNED, sizeof(*h->learned_ns));
		if (!h->learned || !h->learned_ns) {
			/* Not kept: the name's connect is judged as not covered. */
			free(h->learned);
			free(h->learned_ns);
			h->learned = NULL;
			h->learned_ns = NULL;
			return;
		}
	}
	k = brk_hosts_slot(h, name, &found);
	snprintf(h->learned[k].name, sizeof(h->learned[k].name), "%s", name);
	h->learned[k].naddr = n < BRK_HOSTS_ADDRS ? n : BRK_HOSTS_ADDRS;
	memcpy(h->learned[k].addr, a, h->learned[k].naddr * sizeof(*a));
	h->learned_ns[k] = cb_mono_ns();
}

size_t
brk_hosts_recall(struct brk_sbx *s, const char *name, uint64_t max_age_ns, struct cap_addr *out,
    size_t max, bool *found)
{
	struct brk_hosts *h = s->hosts;
	size_t k, n;

	*found = false;
	if (!h || !h->learned)
		return 0;
	k = brk_hosts_slot(h, name, found);
	if (!*found)
		return 0;
	if (cb_mono_ns() - h->learned_ns[k] > max_age_ns) {
		*found = false;
		return 0;
	}
	n = h->learned[k].naddr < max ? h->learned[k].naddr : max;
	memcpy(out, h->learned[k].addr, n * sizeof(*out));
	return n;
}

/* Names in v[0..n) that gave address a: the first judgment that allows
 * port, else the first refusal (*first, with *out and *name). */
static bool
brk_hosts_judge(struct brk_sbx *s, const struct brk_hname *v, size_t n, const struct cap_addr *a,
    int port, int *first, struct brk_held **out, const char **name)
{
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < v[k].naddr; i++) {
			struct brk_held *t = NULL;
			int e;

			if (v[k].addr[i].family != a->family ||
			    memcmp(v[k].addr[i].b, a->b, a->family == AF_INET ? 4 : 16) != 0)
				continue;
			if ((e = brk_net_check(s, NULL, v[k].name, port, a, &t)) == 0) {
				*first = 0;
				*out = t;
				*name = v[k].name;
				return true;
			}
			if (*first == CB_ENOTCOVERED) {
				*first = e;
				*out = t;
				*name = v[k].name;
			}
			break;
		}
	}
	return false;
}

int
brk_hosts_check(struct brk_sbx *s, const struct cap_addr *a, int port, struct brk_held **out,
    const char **name)
{
	struct brk_hosts *h = s->hosts;
	struct brk_hname *l;
	int first = CB_ENOTCOVERED;

	*out = NULL;
	*name = NULL;
	if (!h || brk_hosts_judge(s, h->v, h->n, a, port, &first, out, name))
		return first;
	/* then the names looked up for the sandbox's DNS queries, in use */
	l = h->learned;
	for (size_t k = 0; l && k < BRK_HOSTS_LEARNED; k++)
		if (h->learned_ns[k] && brk_hosts_judge(s, &l[k], 1, a, port, &first, out, name))
			return first;
	return first;
}
