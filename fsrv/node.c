/*
 * node.c - the table of names the kernel holds for one served tree, and the
 * pure rules of fsrv (acceptable names, what an open needs).
 *
 * Trust domain: broker.  A node is a parent and a name, never an fd: each
 * operation rebuilds the node's path and resolves it again from the tree's
 * root fd with openat2 (server.c), so a directory moved out of the tree on
 * the host cannot carry later operations with it, and what the caller's
 * authorisation function judged (the path) is what gets resolved.  The
 * table is bounded (fsrv_cfg.max_nodes, shared by a server's trees
 * through the pool) so a lookup flood costs a bounded amount of broker
 * memory, and keeps its names in the order they were last looked up so
 * the server can ask the kernel to forget the oldest.
 */
#include "fsrv/fsrv_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define FSRV_NODES_START 64u	/* buckets and ids a tree starts with (a power of 2) */

static uint32_t
fsrv_hash(uint64_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;	/* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32));
}

static struct fsrv_node **
fsrv_bucket(const struct fsrv_nodes *t, uint64_t parent, const char *name)
{
	return &t->buckets[fsrv_hash(parent, name) & (t->nbuckets - 1)];
}

static void
fsrv_hash_del(struct fsrv_nodes *t, struct fsrv_node *n)
{
	struct fsrv_node **pp;

	if (!n->linked)
		return;
	for (pp = fsrv_bucket(t, n->parent->id, n->name); *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
	n->hnext = NULL;
	n->linked = false;
}

static void
fsrv_lru_del(struct fsrv_nodes *t, struct fsrv_node *n)
{
	if (n->lru_prev != NULL)
		n->lru_prev->lru_next = n->lru_next;
	else if (t->lru_head == n)
		t->lru_head = n->lru_next;
	if (n->lru_next != NULL)
		n->lru_next->lru_prev = n->lru_prev;
	else if (t->lru_tail == n)
		t->lru_tail = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
}

/* n was just looked up: first in the LRU order. */
static void
fsrv_lru_touch(struct fsrv_nodes *t, struct fsrv_node *n)
{
	if (t->lru_head == n)
		return;
	fsrv_lru_del(t, n);
	n->lru_next = t->lru_head;
	if (t->lru_head != NULL)
		t->lru_head->lru_prev = n;
	t->lru_head = n;
	if (t->lru_tail == NULL)
		t->lru_tail = n;
}

static void
fsrv_hash_add(struct fsrv_nodes *t, struct fsrv_node *n)
{
	struct fsrv_node **b = fsrv_bucket(t, n->parent->id, n->name);

	n->hnext = *b;
	*b = n;
	n->linked = true;
}

/* Double the buckets when the table is denser than one node a bucket. */
static void
fsrv_rehash(struct fsrv_nodes *t)
{
	uint32_t nb = t->nbuckets * 2;
	struct fsrv_node **b;

	if (t->count < t->nbuckets || nb == 0)
		return;
	b = calloc(nb, sizeof(*b));
	if (b == NULL)
		return;		/* longer chains, still correct */
	for (uint32_t i = 0; i < t->nbuckets; i++) {
		struct fsrv_node *n = t->buckets[i], *next;

		for (; n; n = next) {
			next = n->hnext;
			uint32_t h = fsrv_hash(n->parent->id, n->name) & (nb - 1);
			n->hnext = b[h];
			b[h] = n;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

int
fsrv_nodes_init(struct fsrv_nodes *t, uint32_t max)
{
	struct fsrv_node *root = NULL;
	int e = CB_ENOMEM;

	memset(t, 0, sizeof(*t));
	t->max = max ? max : FSRV_MAX_NODES_DEFAULT;
	/* Small, and doubled as names come (fsrv_rehash, fsrv_new_id): a
	 * medium sandbox has five trees (the workspace and four slots, most
	 * never used), and 1,024 of each cost 20 KiB a tree at rest. */
	t->nbuckets = FSRV_NODES_START;
	t->capids = FSRV_NODES_START;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	t->byid = calloc(t->capids, sizeof(*t->byid));
	t->freeids = calloc(t->capids, sizeof(*t->freeids));
	root = calloc(1, sizeof(*root));
	if (t->buckets == NULL || t->byid == NULL || t->freeids == NULL || root == NULL)
		goto out;
	root->name = strdup("");
	if (root->name == NULL)
		goto out;
	root->id = FSRV_ROOT_ID;
	root->linked = true;	/* never unlinked, never in the hash */
	root->nlookup = 1;	/* the kernel never forgets the root */
	t->byid[0] = root;
	t->nids = 1;
	t->count = 1;
	root = NULL;
	e = 0;
out:
	free(root);
	if (e != 0)
		fsrv_nodes_fini(t);
	return e;
}

static void
fsrv_node_free(struct fsrv_node *n)
{
	if (n != NULL)
		free(n->name);
	free(n);
}

void
fsrv_nodes_fini(struct fsrv_nodes *t)
{
	if (t->pool != NULL && t->count > 0)
		*t->pool -= t->count - 1;	/* the root is not in the pool */
	if (t->byid != NULL)
		for (uint32_t i = 0; i < t->nids; i++)
			fsrv_node_free(t->byid[i]);
	free(t->byid);
	free(t->buckets);
	free(t->freeids);
	memset(t, 0, sizeof(*t));
}

struct fsrv_node *
fsrv_node_get(const struct fsrv_nodes *t, uint64_t id)
{
	if (id == 0 || id > t->nids)
		return NULL;
	return t->byid[id - 1];
}

struct fsrv_node *
fsrv_node_find(const struct fsrv_nodes *t, const struct fsrv_node *parent, const char *name)
{
	for (struct fsrv_node *n = *fsrv_bucket(t, parent->id, name); n; n = n->hnext)
		if (n->parent == parent && strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

/* An id for a new node: a freed one, or the next. */
static int
fsrv_new_id(struct fsrv_nodes *t, uint64_t *id)
{
	if (t->nfree > 0) {
		*id = (uint64_t)t->freeids[--t->nfree] + 1;
		return 0;
	}
	if (t->nids == t->capids) {
		uint32_t nc = t->capids * 2;
		struct fsrv_node **b = realloc(t->byid, nc * sizeof(*b));
		uint32_t *f;

		if (b == NULL)
			return CB_ENOMEM;
		t->byid = b;
		f = realloc(t->freeids, nc * sizeof(*f));
		if (f == NULL)
			return CB_ENOMEM;
		t->freeids = f;
		memset(t->byid + t->capids, 0, (nc - t->capids) * sizeof(*b));
		t->capids = nc;
	}
	*id = ++t->nids;
	return 0;
}

int
fsrv_node_ref(struct fsrv_nodes *t, struct fsrv_node *parent, const char *name,
	      struct fsrv_node **out)
{
	struct fsrv_node *n = fsrv_node_find(t, parent, name);
	int e;

	if (n != NULL) {
		n->nlookup++;
		if (n->released)
			t->nreleased--;
		n->released = false;
		fsrv_lru_touch(t, n);
		*out = n;
		return 0;
	}
	if (t->count >= t->max || (t->pool != NULL && *t->pool >= t->pool_max))
		return CB_EBUSY;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return CB_ENOMEM;
	n->name = strdup(name);
	if (n->name == NULL || (e = fsrv_new_id(t, &n->id)) != 0) {
		fsrv_node_free(n);
		return CB_ENOMEM;
	}
	n->gen = ++t->gen;
	n->parent = parent;
	parent->nchild++;
	n->nlookup = 1;
	t->byid[n->id - 1] = n;
	t->count++;
	if (t->pool != NULL)
		(*t->pool)++;
	fsrv_lru_touch(t, n);
	fsrv_hash_add(t, n);
	fsrv_rehash(t);
	*out = n;
	return 0;
}

/* Free n if nothing holds it, then its parent if that was its last hold. */
static void
fsrv_node_gc(struct fsrv_nodes *t, struct fsrv_node *n)
{
	while (n != NULL && n->id != FSRV_ROOT_ID && n->nlookup == 0 && n->nchild == 0 &&
	       n->nopen == 0) {
		struct fsrv_node *p = n->parent;

		fsrv_hash_del(t, n);
		fsrv_lru_del(t, n);
		if (n->released)
			t->nreleased--;
		t->byid[n->id - 1] = NULL;
		t->freeids[t->nfree++] = (uint32_t)(n->id - 1);
		t->count--;
		if (t->pool != NULL)
			(*t->pool)--;
		fsrv_node_free(n);
		p->nchild--;
		n = p;
	}
}

void
fsrv_node_forget(struct fsrv_nodes *t, struct fsrv_node *n, uint64_t nlookup)
{
	if (n->id == FSRV_ROOT_ID)
		return;
	n->nlookup = nlookup > n->nlookup ? 0 : n->nlookup - nlookup;
	fsrv_node_gc(t, n);
}

size_t
fsrv_nodes_lru(struct fsrv_nodes *t, size_t want, struct fsrv_node **out)
{
	size_t got = 0, looked = 0, limit = want + 1024;
	struct fsrv_node *n = t->lru_tail;

	while (n != NULL && got < want && looked++ < limit) {
		struct fsrv_node *prev = n->lru_prev;

		if (n->linked && n->nopen == 0 && n->nchild == 0 && n->parent != NULL &&
		    !n->released)
			out[got++] = n;
		n = prev;
	}
	/* Chosen ones move to the front only now: moving them while walking
	 * would bring them back under the walk. */
	t->nreleased += (uint32_t)got;
	for (size_t i = 0; i < got; i++) {
		out[i]->released = true;
		fsrv_lru_touch(t, out[i]);
	}
	return got;
}

void
fsrv_node_hold(struct fsrv_node *n)
{
	n->nopen++;
}

void
fsrv_node_release(struct fsrv_nodes *t, struct fsrv_node *n)
{
	if (n->nopen > 0)
		n->nopen--;
	fsrv_node_gc(t, n);
}

void
fsrv_node_unlink(struct fsrv_nodes *t, struct fsrv_node *parent, const char *name)
{
	struct fsrv_node *n = fsrv_node_find(t, parent, name);

	if (n != NULL)
		fsrv_hash_del(t, n);
}

/* Re-parent and rename n (already out of the hash) and hash it again. */
static int
fsrv_node_move(struct fsrv_nodes *t, struct fsrv_node *n, struct fsrv_node *np, const char *nn)
{
	char *name = strdup(nn);

	if (name == NULL)
		return CB_ENOMEM;
	free(n->name);
	n->name = name;
	if (n->parent != np) {
		struct fsrv_node *old = n->parent;

		np->nchild++;
		n->parent = np;
		old->nchild--;
		/* old keeps its own holds; the gc below cannot free np or n */
		fsrv_hash_add(t, n);
		fsrv_node_gc(t, old);
		return 0;
	}
	fsrv_hash_add(t, n);
	return 0;
}

int
fsrv_node_rename(struct fsrv_nodes *t, struct fsrv_node *op, const char *on,
		 struct fsrv_node *np, const char *nn, bool exchange)
{
	struct fsrv_node *a = fsrv_node_find(t, op, on);
	struct fsrv_node *b = fsrv_node_find(t, np, nn);
	int e = 0;

	if (a == b)
		return 0;
	if (a != NULL)
		fsrv_hash_del(t, a);
	if (b != NULL)
		fsrv_hash_del(t, b);
	/* Pin both parents: a move may drop the last child of either. */
	op->nopen++;
	np->nopen++;
	if (a != NULL)
		e = fsrv_node_move(t, a, np, nn);
	if (e == 0 && exchange && b != NULL)
		e = fsrv_node_move(t, b, op, on);
	op->nopen--;
	np->nopen--;
	/* A replaced b keeps its old path for open handles; it is no longer
	 * found by name.  Parents pinned above are collected when unheld. */
	fsrv_node_gc(t, op);
	if (np != op)
		fsrv_node_gc(t, np);
	return e;
}

int
fsrv_node_path(const struct fsrv_node *n, char *buf, size_t len)
{
	size_t pos = len;

	if (len == 0)
		return CB_ETOOBIG;
	buf[--pos] = '\0';
	for (; n != NULL && n->parent != NULL; n = n->parent) {
		size_t l = strlen(n->name);

		if (l + (pos < len - 1 ? 1 : 0) > pos)
			return CB_ETOOBIG;
		if (pos < len - 1)
			buf[--pos] = '/';
		pos -= l;
		memcpy(buf + pos, n->name, l);
	}
	memmove(buf, buf + pos, len - pos);
	return 0;
}

int
fsrv_child_path(const struct fsrv_node *parent, const char *name, char *buf, size_t len)
{
	size_t pl, nl = strlen(name);
	int e = fsrv_node_path(parent, buf, len);

	if (e != 0)
		return e;
	pl = strlen(buf);
	if (pl + (pl ? 1 : 0) + nl + 1 > len)
		return CB_ETOOBIG;
	if (pl)
		buf[pl++] = '/';
	memcpy(buf + pl, name, nl + 1);
	return 0;
}

bool
fsrv_name_ok(const char *name)
{
	size_t l = strnlen(name, FSRV_NAME_MAX + 1);

	if (l == 0 || l > FSRV_NAME_MAX)
		return false;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	return strchr(name, '/') == NULL;
}

unsigned
fsrv_open_need(int flags)
{
	unsigned need = 0;

	switch (flags & O_ACCMODE) {
	case O_RDONLY: need = FSRV_CAP_READ; break;
	case O_WRONLY: need = FSRV_CAP_WRITE; break;
	default: need = FSRV_CAP_READ | FSRV_CAP_WRITE; break;
	}
	if (flags & (O_TRUNC | O_CREAT | O_APPEND))
		need |= FSRV_CAP_WRITE;
	return need;
}

int
fsrv_open_flags(int flags)
{
	int acc = flags & O_ACCMODE;

	if (acc != O_RDONLY && acc != O_WRONLY)
		acc = O_RDWR;
	return acc | (flags & (O_APPEND | O_TRUNC | O_CREAT | O_EXCL));
}

bool
fsrv_path_within(const char *path, const char *prefix)
{
	size_t l = strlen(prefix);

	if (l == 0)
		return true;
	return strncmp(path, prefix, l) == 0 && (path[l] == '\0' || path[l] == '/');
}
