/*
 * test_fsrv.c - the file server's pure logic: the node table (paths
 * rebuilt from parent + name through lookups, renames, unlinks and
 * forgets; its bound), acceptable names, what an open needs; a slot's
 * root is given once, a directory, to a slot only.
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsrv/fsrv_int.h"
#include "tests/tap.h"

static const char *
path_of(const struct fsrv_node *n)
{
	static char buf[FSRV_PATH_MAX];

	if (fsrv_node_path(n, buf, sizeof(buf)) != 0)
		return "<toobig>";
	return buf;
}

static void
test_paths(void)
{
	struct fsrv_nodes t;
	struct fsrv_node *root, *a, *b, *c, *again;
	char buf[FSRV_PATH_MAX];

	T_ERR(fsrv_nodes_init(&t, 0), 0, "init");
	root = fsrv_node_get(&t, FSRV_ROOT_ID);
	T_OK(root != NULL && strcmp(path_of(root), "") == 0, "the root's path is empty");
	T_ERR(fsrv_node_ref(&t, root, "a", &a), 0, "lookup a");
	T_ERR(fsrv_node_ref(&t, a, "b", &b), 0, "lookup a/b");
	T_ERR(fsrv_node_ref(&t, b, "c.txt", &c), 0, "lookup a/b/c.txt");
	T_OK(strcmp(path_of(c), "a/b/c.txt") == 0, "path rebuilt from the root: %s", path_of(c));
	T_ERR(fsrv_child_path(b, "new", buf, sizeof(buf)), 0, "child path");
	T_OK(strcmp(buf, "a/b/new") == 0, "child path is a/b/new");
	T_ERR(fsrv_child_path(root, "top", buf, sizeof(buf)), 0, "child of the root");
	T_OK(strcmp(buf, "top") == 0, "child of the root has no leading slash");
	T_ERR(fsrv_node_ref(&t, b, "c.txt", &again), 0, "lookup again");
	T_OK(again == c && c->nlookup == 2, "a second lookup counts on the same node");
	T_OK(fsrv_node_get(&t, c->id) == c, "found by id");
	T_OK(fsrv_node_get(&t, 0) == NULL && fsrv_node_get(&t, 99999) == NULL,
	     "unknown ids are refused, not dereferenced");

	/* rename a/b -> top/z: the whole subtree's paths follow */
	struct fsrv_node *top;
	T_ERR(fsrv_node_ref(&t, root, "top", &top), 0, "lookup top");
	T_ERR(fsrv_node_rename(&t, a, "b", top, "z", false), 0, "rename a/b to top/z");
	T_OK(strcmp(path_of(c), "top/z/c.txt") == 0, "child follows its renamed parent: %s",
	     path_of(c));
	T_OK(fsrv_node_find(&t, a, "b") == NULL, "the old name is gone");
	T_OK(fsrv_node_find(&t, top, "z") == b, "the new name finds the node");

	/* rename over an existing name: the replaced node is no longer found */
	struct fsrv_node *x, *y;
	T_ERR(fsrv_node_ref(&t, root, "x", &x), 0, "lookup x");
	T_ERR(fsrv_node_ref(&t, root, "y", &y), 0, "lookup y");
	fsrv_node_hold(y);	/* an open handle on y */
	T_ERR(fsrv_node_rename(&t, root, "x", root, "y", false), 0, "rename x over y");
	T_OK(fsrv_node_find(&t, root, "y") == x, "y now names the moved node");
	T_OK(!y->linked && strcmp(path_of(y), "y") == 0,
	     "the replaced node keeps its last path for its open handle");

	/* exchange */
	struct fsrv_node *p, *q;
	T_ERR(fsrv_node_ref(&t, root, "p", &p), 0, "lookup p");
	T_ERR(fsrv_node_ref(&t, top, "q", &q), 0, "lookup top/q");
	T_ERR(fsrv_node_rename(&t, root, "p", top, "q", true), 0, "exchange p and top/q");
	T_OK(strcmp(path_of(p), "top/q") == 0 && strcmp(path_of(q), "p") == 0,
	     "exchange swaps the two names");

	/* unlink, forget */
	uint32_t before = t.count;
	fsrv_node_unlink(&t, root, "p");
	T_OK(fsrv_node_find(&t, root, "p") == NULL, "an unlinked name is not found");
	fsrv_node_forget(&t, q, q->nlookup);
	T_OK(t.count == before - 1, "forgetting an unlinked node frees it");
	before = t.count;
	fsrv_node_forget(&t, y, 1);
	T_OK(t.count == before, "a replaced node with an open handle stays");
	fsrv_node_release(&t, y);
	T_OK(t.count == before - 1, "closing its last handle frees it");
	fsrv_node_forget(&t, c, 2);
	fsrv_node_forget(&t, b, 1);
	T_OK(fsrv_node_find(&t, top, "z") == NULL, "a forgotten child and parent are freed");
	fsrv_node_forget(&t, root, 5);
	T_OK(fsrv_node_get(&t, FSRV_ROOT_ID) == root, "the root is never forgotten");
	fsrv_nodes_fini(&t);
}

static void
test_bound(void)
{
	struct fsrv_nodes t;
	struct fsrv_node *root, *n = NULL;
	char name[32];
	int e = 0;
	unsigned i;

	T_ERR(fsrv_nodes_init(&t, 100), 0, "init with a bound of 100");
	root = fsrv_node_get(&t, FSRV_ROOT_ID);
	for (i = 0; i < 200 && e == 0; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		e = fsrv_node_ref(&t, root, name, &n);
	}
	T_ERR(e, CB_EBUSY, "a lookup flood stops at the bound");
	T_OK(t.count == 100, "the table holds exactly its bound (%u)", t.count);
	fsrv_node_forget(&t, fsrv_node_find(&t, root, "f5"), 1);
	T_ERR(fsrv_node_ref(&t, root, "again", &n), 0, "a forget makes room");
	T_OK(n->id == 7, "and its id is reused (%llu)", (unsigned long long)n->id);
	fsrv_nodes_fini(&t);

	/* many nodes: the hash grows and still finds everything */
	T_ERR(fsrv_nodes_init(&t, 0), 0, "init");
	root = fsrv_node_get(&t, FSRV_ROOT_ID);
	e = 0;
	for (i = 0; i < 20000 && e == 0; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		e = fsrv_node_ref(&t, root, name, &n);
	}
	T_OK(e == 0 || e == CB_EBUSY, "20000 lookups");
	T_OK(fsrv_node_find(&t, root, "n12345") != NULL && t.nbuckets >= 16384,
	     "found after growth (%u buckets)", t.nbuckets);
	fsrv_nodes_fini(&t);
}

/* Trees of one server share one bound (the pool), and the least recently
 * looked-up names are the ones the server asks the kernel to forget. */
static void
test_pool_lru(void)
{
	struct fsrv_nodes a, b;
	struct fsrv_node *ra, *rb, *n = NULL, *v[8], *d = NULL;
	uint32_t pool = 0;
	char name[32];
	int e = 0;
	size_t got;

	T_ERR(fsrv_nodes_init(&a, 100), 0, "pool: init a");
	T_ERR(fsrv_nodes_init(&b, 100), 0, "pool: init b");
	a.pool = b.pool = &pool;
	a.pool_max = b.pool_max = 10;
	ra = fsrv_node_get(&a, FSRV_ROOT_ID);
	rb = fsrv_node_get(&b, FSRV_ROOT_ID);
	for (unsigned i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "a%u", i);
		e |= fsrv_node_ref(&a, ra, name, &n);
	}
	for (unsigned i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "b%u", i);
		e |= fsrv_node_ref(&b, rb, name, &n);
	}
	T_OK(e == 0 && pool == 10, "pool: ten names in two tables (%u)", pool);
	T_ERR(fsrv_node_ref(&b, rb, "b4", &n), CB_EBUSY, "pool: the shared bound refuses the 11th");
	T_ERR(fsrv_node_ref(&a, ra, "a0", &n), 0, "pool: a known name is still found");
	fsrv_node_forget(&a, fsrv_node_find(&a, ra, "a0"), 1);
	T_OK(pool == 10, "pool: a name still looked up (twice, once forgotten) stays");
	fsrv_node_forget(&a, fsrv_node_find(&a, ra, "a1"), 1);
	T_ERR(fsrv_node_ref(&b, rb, "b4", &n), 0, "pool: a forget in one table makes room in the other");

	/* LRU: a0 was looked up again last; a1 is gone */
	got = fsrv_nodes_lru(&a, 3, v);
	T_OK(got == 3 && strcmp(v[0]->name, "a2") == 0 && strcmp(v[1]->name, "a3") == 0 &&
	     strcmp(v[2]->name, "a4") == 0, "lru: the least recently looked up first");
	got = fsrv_nodes_lru(&a, 3, v);
	T_OK(got == 2 && strcmp(v[0]->name, "a5") == 0 && strcmp(v[1]->name, "a0") == 0,
	     "lru: a name asked for once is not asked for again (%zu)", got);
	T_ERR(fsrv_node_ref(&a, ra, "a2", &n), 0, "lru: a2 looked up again");
	got = fsrv_nodes_lru(&a, 3, v);
	T_OK(got == 1 && v[0] == n, "lru: ... and may be asked for again");
	T_ERR(fsrv_node_ref(&a, ra, "a3", &n), 0, "lru: a3 looked up again");
	fsrv_nodes_fini(&b);
	T_OK(pool == 5, "pool: a freed table gives its names back (%u)", pool);

	/* an open name and a directory with a known child are not chosen */
	T_ERR(fsrv_node_ref(&a, ra, "a4", &n), 0, "lru: a4 looked up again");
	fsrv_node_hold(n);
	T_ERR(fsrv_node_ref(&a, ra, "dir", &d), 0, "lru: a directory");
	T_ERR(fsrv_node_ref(&a, d, "child", &n), 0, "lru: ... with a child");
	got = fsrv_nodes_lru(&a, 8, v);
	T_OK(got == 2 && strcmp(v[0]->name, "a3") == 0 && strcmp(v[1]->name, "child") == 0,
	     "lru: open names and directories with children stay (%zu)", got);
	fsrv_nodes_fini(&a);
	T_OK(pool == 0, "pool: empty again (%u)", pool);
}

static void
test_toolong(void)
{
	struct fsrv_nodes t;
	struct fsrv_node *n;
	char name[FSRV_NAME_MAX + 1], buf[FSRV_PATH_MAX];
	int e = 0;

	T_ERR(fsrv_nodes_init(&t, 0), 0, "init");
	n = fsrv_node_get(&t, FSRV_ROOT_ID);
	memset(name, 'x', FSRV_NAME_MAX);
	name[FSRV_NAME_MAX] = '\0';
	for (int i = 0; i < 20 && e == 0; i++)
		e = fsrv_node_ref(&t, n, name, &n);
	T_ERR(fsrv_node_path(n, buf, sizeof(buf)), CB_ETOOBIG, "a path over 4096 bytes is refused");
	T_ERR(fsrv_node_path(n, buf, 0), CB_ETOOBIG, "an empty buffer is refused");
	fsrv_nodes_fini(&t);
}

static void
test_rules(void)
{
	char longname[FSRV_NAME_MAX + 2];

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	T_OK(fsrv_name_ok("a.txt") && fsrv_name_ok(".git") && fsrv_name_ok("..."), "plain names");
	T_OK(!fsrv_name_ok("") && !fsrv_name_ok(".") && !fsrv_name_ok(".."), "no empty, . or ..");
	T_OK(!fsrv_name_ok("a/b") && !fsrv_name_ok("/"), "no slash");
	T_OK(!fsrv_name_ok(longname), "no name over 255 bytes");
	T_OK(fsrv_open_need(O_RDONLY) == FSRV_CAP_READ, "read-only open needs fs.read");
	T_OK(fsrv_open_need(O_WRONLY) == FSRV_CAP_WRITE, "write-only open needs fs.write");
	T_OK(fsrv_open_need(O_RDWR) == (FSRV_CAP_READ | FSRV_CAP_WRITE), "O_RDWR needs both");
	T_OK(fsrv_open_need(O_RDONLY | O_TRUNC) == (FSRV_CAP_READ | FSRV_CAP_WRITE),
	     "O_TRUNC needs fs.write even read-only");
	T_OK(fsrv_open_need(O_ACCMODE) == (FSRV_CAP_READ | FSRV_CAP_WRITE),
	     "an invalid access mode needs both");
	T_OK(fsrv_open_flags(O_RDONLY | O_DIRECT | O_NOATIME | O_NOFOLLOW | O_PATH) == O_RDONLY,
	     "O_DIRECT, O_NOATIME, O_PATH and the like are dropped");
	T_OK(fsrv_open_flags(O_WRONLY | O_APPEND | O_TRUNC) == (O_WRONLY | O_APPEND | O_TRUNC),
	     "O_APPEND and O_TRUNC pass");
	T_OK(fsrv_path_within("a/b", "a") && fsrv_path_within("a", "a") && fsrv_path_within("x", ""),
	     "within: equal, beneath, root");
	T_OK(!fsrv_path_within("ab", "a") && !fsrv_path_within("a", "a/b"), "within: not a prefix of a name");
	T_OK(strcmp(fsrv_cap_name(FSRV_CAP_DELETE), "fs.delete") == 0 &&
	     strcmp(fsrv_op_name(FSRV_OP_RENAME), "rename") == 0 &&
	     strcmp(fsrv_op_name((enum fsrv_op)999), "?") == 0, "names of caps and ops");
}

static int
allow_all(void *arg, const struct fsrv_check *c)
{
	(void)arg;
	(void)c;
	return 0;
}

/* Slots (fsrv_add_slot, fsrv_slot_fill).  The connection is not read
 * here: any descriptor stands for one. */
static void
test_slots(void)
{
	struct fsrv_cfg cfg = { .authz = allow_all };
	struct fsrv *s = NULL;
	unsigned slot = 0, tree = 0;
	int dev = open("/dev/null", O_RDWR | O_CLOEXEC);
	int dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int file = open("/dev/null", O_PATH | O_CLOEXEC);

	T_ERR(fsrv_new(&cfg, &s), 0, "a server");
	if (s == NULL)
		return;
	T_ERR(fsrv_add_slot(s, dev, &slot), 0, "a slot: a tree without a root yet");
	T_ERR(fsrv_add_tree(s, -1, dev, &tree), CB_EINVAL, "a tree needs a root");
	T_ERR(fsrv_add_tree(s, dir, dev, &tree), 0, "a tree with one");
	T_ERR(fsrv_slot_fill(s, slot, file, false, 0, 0), CB_EINVAL,
	      "a slot's root must be a directory");
	T_ERR(fsrv_slot_fill(s, tree, dir, false, 0, 0), CB_EINVAL,
	      "a tree that is not a slot is not filled");
	T_ERR(fsrv_slot_fill(s, 99, dir, false, 0, 0), CB_EINVAL, "nor a tree that does not exist");
	T_ERR(fsrv_slot_fill(s, slot, dir, false, 0, 0), 0, "a slot takes its root");
	T_ERR(fsrv_slot_fill(s, slot, dir, false, 0, 0), CB_EINVAL, "... once only");
	fsrv_free(s);
	close(dev);
	close(dir);
	close(file);
}

/* No process-wide bound on connections but the descriptors: with
 * libfuse, each session took a pthread key, glibc has 1,024 a process, and
 * a broker refused the next sandbox at about 205 medium ones ("served tree
 * ...: internal error"; then FSRV_SESSIONS_MAX, 960).  fsrv speaks the
 * protocol itself now: 1,280 slots over 20 servers are all made. */
static void
test_many_connections(void)
{
	struct fsrv_cfg cfg = { .authz = allow_all };
	struct fsrv *s[20] = { NULL };
	struct rlimit rl;
	unsigned n = 0, tree;
	int dev = open("/dev/null", O_RDWR | O_CLOEXEC);
	int dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	/* One descriptor a connection: room for them all. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
		rl.rlim_cur = 4096;
		cb_ignore(setrlimit(RLIMIT_NOFILE, &rl));
	}
	for (size_t i = 0; i < 20 && r == 0; i++) {
		if ((r = fsrv_new(&cfg, &s[i])) != 0)
			break;
		for (unsigned k = 0; k < FSRV_MAX_TREES && r == 0; k++)
			if ((r = fsrv_add_slot(s[i], dev, &tree)) == 0)
				n++;
	}
	T_ERR(r, 0, "20 servers of %u slots each are made", FSRV_MAX_TREES);
	T_OK(n == 20 * FSRV_MAX_TREES, "... all %u of them (past glibc's 1,024 pthread keys)", n);
	T_ERR(s[19] ? fsrv_add_slot(s[19], dev, &tree) : -1, CB_EBUSY,
	    "a server's own bound stays (FSRV_MAX_TREES)");
	for (size_t i = 0; i < 20; i++)
		fsrv_free(s[i]);
	close(dev);
	close(dir);
}

int
main(void)
{
	test_paths();
	test_bound();
	test_pool_lru();
	test_toolong();
	test_rules();
	test_slots();
	test_many_connections();
	return t_done();
}
