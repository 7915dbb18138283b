/*
 * test_fsrv_proto.c - fsrv's own FUSE protocol (fsrv/proto.c): the
 * decoder refuses every malformed request it is shown (lengths, names,
 * write sizes, forget counts, extensions); and a server answers requests
 * written to it over a socketpair standing in for /dev/fuse: nothing
 * before INIT, INIT's negotiation (what is asked for and what never is),
 * ENOSYS for what is not served, no answer to a forget, a lookup and a
 * getattr of a real directory; owner_as_agent's owner and chown, and the
 * errors an authorisation function's refusals become.  And a pool of
 * threads (fsrv/pool.c) serving two servers: one held in its authorisation
 * function does not hold up the other's answer, the pool grows for it and
 * shrinks after, and a server freed by its control function is forgotten.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsrv/fsrv.h"
#include "fsrv/fsrv_int.h"
#include "tests/tap.h"

/* A request: header, fixed part, then tail bytes as given. */
static size_t
req(char *buf, uint32_t opcode, uint64_t unique, uint64_t node, const void *fixed, size_t flen,
    const void *tail, size_t tlen)
{
	struct fuse_in_header h = { .opcode = opcode, .unique = unique, .nodeid = node,
		.uid = 1000, .gid = 1000, .pid = 42 };

	h.len = (uint32_t)(sizeof(h) + flen + tlen);
	memcpy(buf, &h, sizeof(h));
	if (flen)
		memcpy(buf + sizeof(h), fixed, flen);
	if (tlen)
		memcpy(buf + sizeof(h) + flen, tail, tlen);
	return h.len;
}

static void
test_decode(void)
{
	_Alignas(8) char buf[512] = { 0 };
	struct fsrv_msg m;
	struct fuse_in_header *h = (struct fuse_in_header *)buf;
	struct fuse_write_in w = { .size = 5 };
	struct fuse_fallocate_in fa = { .fh = 5, .length = 4096, .mode = 1 };
	struct fuse_batch_forget_in bf = { .count = 2 };
	struct fuse_forget_one fo[2] = { { 2, 1 }, { 3, 1 } };
	struct fuse_rename2_in rn = { .newdir = 1 };
	struct fuse_init_in in = { .major = 7, .minor = 38 };
	size_t n;

	T_ERR(fsrv_msg_decode(buf, 39, &m), -1, "shorter than a header: nothing to answer");
	n = req(buf, FUSE_LOOKUP, 7, 1, NULL, 0, "name", 5);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a lookup decodes");
	T_OK(m.name != NULL && strcmp(m.name, "name") == 0 && m.h.unique == 7 && m.h.nodeid == 1,
	    "... with its name, unique and node");
	T_ERR(fsrv_msg_decode(buf, n - 1, &m), EIO, "a header whose length is not what was read");
	n = req(buf, FUSE_LOOKUP, 7, 1, NULL, 0, "name", 4);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a name without its NUL inside the request");
	n = req(buf, FUSE_LOOKUP, 7, 1, NULL, 0, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a lookup without a name");
	n = req(buf, FUSE_SYMLINK, 8, 1, NULL, 0, "new\0target", 11);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a symlink decodes");
	T_OK(m.name && m.name2 && !strcmp(m.name, "new") && !strcmp(m.name2, "target"),
	    "... its new name, then its text");
	n = req(buf, FUSE_SYMLINK, 8, 1, NULL, 0, "new\0target", 10);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a second name without its NUL");
	n = req(buf, FUSE_RENAME2, 9, 1, &rn, sizeof(rn), "a\0b", 4);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a rename2 decodes");
	T_OK(m.a.rename2.newdir == 1 && !strcmp(m.name, "a") && !strcmp(m.name2, "b"),
	    "... its new directory and both names");
	n = req(buf, FUSE_RENAME2, 9, 1, &rn, sizeof(rn) - 1, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a fixed part cut short");
	n = req(buf, FUSE_WRITE, 10, 2, &w, sizeof(w), "hello", 5);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a write decodes");
	T_OK(m.datalen == 5 && memcmp(m.data, "hello", 5) == 0, "... its data inside the request");
	w.size = 6;
	n = req(buf, FUSE_WRITE, 10, 2, &w, sizeof(w), "hello", 5);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a write saying more than it carries");
	w.size = UINT32_MAX;
	n = req(buf, FUSE_WRITE, 10, 2, &w, sizeof(w), "hello", 5);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "... or 4 GiB");
	w.size = 4;
	n = req(buf, FUSE_WRITE, 10, 2, &w, sizeof(w), "hello", 5);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "... or less");
	n = req(buf, FUSE_BATCH_FORGET, 11, 0, &bf, sizeof(bf), fo, sizeof(fo));
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a batch of forgets decodes");
	T_OK(m.a.forgets.count == 2 && m.datalen == sizeof(fo), "... two of them");
	bf.count = 3;
	n = req(buf, FUSE_BATCH_FORGET, 11, 0, &bf, sizeof(bf), fo, sizeof(fo));
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a batch counting more than it carries");
	bf.count = UINT32_MAX;
	n = req(buf, FUSE_BATCH_FORGET, 11, 0, &bf, sizeof(bf), fo, sizeof(fo));
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "... or 4 G of them");
	n = req(buf, FUSE_FLUSH, 12, 2, NULL, 0, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), ENOSYS, "an opcode not served: ENOSYS");
	n = req(buf, 4096 + 1, 12, 2, NULL, 0, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), ENOSYS, "... CUSE's too");
	n = req(buf, UINT32_MAX, 12, 2, NULL, 0, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), ENOSYS, "... and any number past the table");
	n = req(buf, FUSE_LOOKUP, 13, 1, NULL, 0, "name\0\0\0\0\0\0\0\0", 13);
	h->total_extlen = 1;
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "extensions are set apart");
	h->total_extlen = 2;
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "extensions longer than the request");
	n = req(buf, FUSE_LOOKUP, 13, 1, NULL, 0, "namexxxx", 8);
	h->total_extlen = 1;
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a name is never read out of the extensions");
	n = req(buf, FUSE_INIT, 1, 0, &in, 16, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a 7.6-sized INIT decodes");
	T_OK(m.a.init.flags2 == 0 && m.a.init.minor == 38, "... flags2 read as 0");
	n = req(buf, FUSE_INIT, 1, 0, &in, 8, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a shorter INIT does not");
	n = req(buf, FUSE_INIT, 1, 0, &in, sizeof(in), "xxxxxxxx", 8);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "an INIT longer than ours decodes");
	n = req(buf, FUSE_SETATTR, 14, 2, &in, 40, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a setattr cut short");
	n = req(buf, FUSE_FALLOCATE, 15, 2, &fa, sizeof(fa), NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), 0, "a fallocate decodes (served: fallocate -l)");
	T_OK(m.a.fallocate.fh == 5 && m.a.fallocate.length == 4096 && m.a.fallocate.mode == 1,
	    "... its handle, length and mode");
	n = req(buf, FUSE_FALLOCATE, 15, 2, &fa, sizeof(fa) - 1, NULL, 0);
	T_ERR(fsrv_msg_decode(buf, n, &m), EIO, "a fallocate cut short");
}

static int
allow_all(void *arg, const struct fsrv_check *c)
{
	(void)arg;
	(void)c;
	return 0;
}

/* The answer to the last request: its header (error, unique) and body. */
static ssize_t
answer(int fd, struct fuse_out_header *h, void *body, size_t len)
{
	_Alignas(8) char buf[4096];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < (ssize_t)sizeof(*h))
		return -1;
	memcpy(h, buf, sizeof(*h));
	if (h->len != (uint32_t)n)
		return -2;
	n -= (ssize_t)sizeof(*h);
	if (body != NULL)
		memcpy(body, buf + sizeof(*h), (size_t)n < len ? (size_t)n : len);
	return n;
}

static void
test_serve(void)
{
	struct fsrv_cfg cfg = { .authz = allow_all, .attr_timeout = 1, .entry_timeout = 1 };
	struct fsrv *s = NULL;
	char dir[] = "/tmp/cb-fsrv-proto-XXXXXX", path[64];
	_Alignas(8) char buf[512];
	struct fuse_out_header h;
	struct fuse_init_in in = { .major = 7, .minor = 40, .max_readahead = 131072,
		.flags = FUSE_ASYNC_READ | FUSE_MAX_PAGES | FUSE_INIT_EXT | FUSE_POSIX_ACL |
			 FUSE_WRITEBACK_CACHE | FUSE_EXPORT_SUPPORT | FUSE_DO_READDIRPLUS |
			 FUSE_ATOMIC_O_TRUNC };
	struct fuse_init_out io;
	struct fuse_entry_out eo;
	struct fuse_attr_out ao;
	struct fuse_forget_in fg = { .nlookup = 1 };
	struct fuse_getattr_in ga = { 0 };
	struct fuse_setattr_in sa;
	uint64_t fnode;
	struct fuse_release_in rl = { 0 };
	struct fuse_read_in rd = { .size = 4096 };
	struct fuse_fallocate_in fz = { .length = 4096 };
	int sp[2], root, fd;
	unsigned tree;
	size_t n;
	ssize_t got;

	if (mkdtemp(dir) == NULL || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
		T_OK(0, "a directory and a socketpair");
		return;
	}
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	T_OK(fd >= 0 && write(fd, "12345", 5) == 5, "a file of 5 bytes");
	if (fd >= 0)
		close(fd);
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	T_ERR(fsrv_new(&cfg, &s), 0, "a server");
	T_ERR(fsrv_add_tree(s, root, sp[1], &tree), 0, "a tree on the socketpair");

	n = req(buf, FUSE_LOOKUP, 2, 1, NULL, 0, "f", 2);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n, "a lookup before INIT");
	T_ERR(fsrv_process(s, tree), 0, "... is read");
	got = answer(sp[0], &h, NULL, 0);
	T_OK(got == 0 && h.unique == 2 && h.error == -EIO, "... and answered EIO (%zd, %d)", got,
	    h.error);

	n = req(buf, FUSE_INIT, 1, 0, &in, sizeof(in), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "INIT");
	memset(&io, 0, sizeof(io));
	got = answer(sp[0], &h, &io, sizeof(io));
	T_OK(got == (ssize_t)sizeof(io) && h.error == 0 && h.unique == 1, "... answered whole");
	T_OK(io.major == 7 && io.minor == FUSE_KERNEL_MINOR_VERSION, "... protocol 7.%u", io.minor);
	T_OK((io.flags & (FUSE_ASYNC_READ | FUSE_MAX_PAGES | FUSE_BIG_WRITES | FUSE_ATOMIC_O_TRUNC |
			  FUSE_INIT_EXT)) ==
	    (FUSE_ASYNC_READ | FUSE_MAX_PAGES | FUSE_BIG_WRITES | FUSE_ATOMIC_O_TRUNC | FUSE_INIT_EXT),
	    "... asks for what was offered and wanted (flags %#x)", io.flags);
	T_OK(!(io.flags & (FUSE_POSIX_ACL | FUSE_WRITEBACK_CACHE | FUSE_EXPORT_SUPPORT |
			   FUSE_DO_READDIRPLUS)),
	    "... and never for ACLs, a writeback cache, export or readdirplus");
	T_OK(!(io.flags & FUSE_ASYNC_DIO), "... nor for what was not offered");
	T_OK(io.max_write == 1u << 20 && io.max_pages == 256, "... 1 MiB writes (%u, %u pages)",
	    io.max_write, io.max_pages);
	T_OK(io.flags2 == 0 && io.unused[0] == 0, "... no passthrough unless the policy opts in");

	n = req(buf, FUSE_FLUSH, 3, 2, NULL, 0, NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "a flush");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -ENOSYS && h.unique == 3,
	    "... is ENOSYS (the kernel then sends no more)");
	n = req(buf, FUSE_LOOKUP, 4, 1, NULL, 0, "f", 1);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a lookup whose name has no NUL");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -EIO, "... is EIO");

	n = req(buf, FUSE_LOOKUP, 5, 1, NULL, 0, "f", 2);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "a lookup of f");
	memset(&eo, 0, sizeof(eo));
	got = answer(sp[0], &h, &eo, sizeof(eo));
	T_OK(got == (ssize_t)sizeof(eo) && h.error == 0 && h.unique == 5, "... answered");
	T_OK(eo.nodeid > FSRV_ROOT_ID && eo.attr.size == 5 && S_ISREG(eo.attr.mode) &&
	    eo.entry_valid == 1 && eo.attr_valid == 1, "... a node for a 5-byte file, cached 1 s");
	fnode = eo.nodeid;

	n = req(buf, FUSE_LOOKUP, 6, 1, NULL, 0, "absent", 7);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "a lookup of absent");
	memset(&eo, 0xff, sizeof(eo));
	got = answer(sp[0], &h, &eo, sizeof(eo));
	T_OK(got == (ssize_t)sizeof(eo) && h.error == 0 && eo.nodeid == 0 && eo.attr.mode == 0,
	    "... a negative entry (node 0, no attributes)");

	n = req(buf, FUSE_GETATTR, 7, 1, &ga, sizeof(ga), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "a getattr of the root");
	memset(&ao, 0, sizeof(ao));
	got = answer(sp[0], &h, &ao, sizeof(ao));
	T_OK(got == (ssize_t)sizeof(ao) && h.error == 0 && S_ISDIR(ao.attr.mode),
	    "... a directory");

	n = req(buf, FUSE_GETATTR, 8, 999, &ga, sizeof(ga), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a getattr of a node never handed out");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -ESTALE, "... is ESTALE");

	/* A chown to the owner the file has changes nothing and is allowed
	 * (cp -a, tar -p); to anyone else it is refused. */
	memset(&sa, 0, sizeof(sa));
	sa.valid = FATTR_UID | FATTR_GID;
	sa.uid = (uint32_t)getuid();
	sa.gid = (uint32_t)getgid();
	n = req(buf, FUSE_SETATTR, 22, fnode, &sa, sizeof(sa), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a chown of f to its own owner and group");
	memset(&ao, 0, sizeof(ao));
	got = answer(sp[0], &h, &ao, sizeof(ao));
	T_OK(got == (ssize_t)sizeof(ao) && h.error == 0 && ao.attr.uid == getuid() &&
	    ao.attr.size == 5, "... is allowed, and changes nothing (error %d)", h.error);
	sa.uid = (uint32_t)getuid() + 1;
	n = req(buf, FUSE_SETATTR, 23, fnode, &sa, sizeof(sa), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a chown of f to another uid");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -EPERM, "... is EPERM");
	sa.valid = FATTR_GID;
	sa.gid = (uint32_t)getgid() + 1;
	n = req(buf, FUSE_SETATTR, 24, fnode, &sa, sizeof(sa), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a chgrp of f to another group");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -EPERM, "... is EPERM");

	/* Handle 0 is the kernel's own, for an open it did not send (after an
	 * OPEN answered ENOSYS): before, RELEASE and READ dereferenced it. */
	n = req(buf, FUSE_RELEASE, 20, eo.nodeid, &rl, sizeof(rl), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a release of handle 0");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -EBADF && h.unique == 20,
	    "... is EBADF, the handle never taken for a pointer");
	n = req(buf, FUSE_READ, 21, eo.nodeid, &rd, sizeof(rd), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a read of handle 0");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -EBADF && h.unique == 21,
	    "... is EBADF too");
	n = req(buf, FUSE_FALLOCATE, 22, eo.nodeid, &fz, sizeof(fz), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0,
	    "a fallocate of handle 0");
	T_OK(answer(sp[0], &h, NULL, 0) == 0 && h.error == -EBADF && h.unique == 22,
	    "... is EBADF too");

	n = req(buf, FUSE_FORGET, 9, eo.nodeid, &fg, sizeof(fg), NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "a forget");
	T_OK(answer(sp[0], &h, NULL, 0) == -1, "... is not answered");
	n = req(buf, FUSE_FORGET, 10, 1, &fg, 3, NULL, 0);
	T_OK(send(sp[0], buf, n, 0) == (ssize_t)n && fsrv_process(s, tree) == 0, "a malformed forget");
	T_OK(answer(sp[0], &h, NULL, 0) == -1, "... is not answered either");
	T_ERR(fsrv_process(s, tree), CB_ETIMEDOUT, "nothing more queued: the read says so");

	close(sp[0]);
	T_ERR(fsrv_process(s, tree), CB_ECLOSED, "the other end gone: the connection is closed");
	fsrv_free(s);
	unlink(path);
	rmdir(dir);
	close(root);
	close(sp[1]);
}

/* Refuses whatever a name with "deep" or "odd" in it asks: as the broker
 * refuses a path no capability can name (too deep; a control character). */
static int
judge_names(void *arg, const struct fsrv_check *c)
{
	(void)arg;
	return strstr(c->path, "deep") ? CB_ETOOBIG : strstr(c->path, "odd") ? CB_EINVAL :
	    strstr(c->path, "no") ? CB_ENOTCOVERED : 0;
}

/* One request of tree, its answer's header and up to len bytes of body. */
static ssize_t
ask(struct fsrv *s, unsigned tree, int fd, const char *buf, size_t n, struct fuse_out_header *h,
    void *body, size_t len)
{
	if (send(fd, buf, n, 0) != (ssize_t)n || fsrv_process(s, tree) != 0)
		return -3;
	return answer(fd, h, body, len);
}

/*
 * owner_as_agent (a root broker's agent is nobody, not the tree's owner):
 * what the root's owner owns is reported as the agent's, so that the
 * kernel lets the agent ask for what only an owner may (the ACL copy of
 * sed -i and cp -a); a chown to the owner it is shown stays a no-op, and
 * the host file keeps its owner.  And what an authorisation function
 * says of a path it cannot judge reaches the agent: ENAMETOOLONG, EINVAL.
 */
static void
test_owner_as_agent(void)
{
	const uid_t agent = getuid() + 7;
	const gid_t agent_g = getgid() + 7;
	struct fsrv_cfg cfg = { .authz = judge_names, .attr_timeout = 1, .entry_timeout = 1,
		.owner_as_agent = true, .agent_uid = agent, .agent_gid = agent_g };
	struct fsrv *s = NULL;
	char dir[] = "/tmp/cb-fsrv-owner-XXXXXX", path[64], path2[64];
	_Alignas(8) char buf[512];
	struct fuse_out_header h;
	struct fuse_init_in in = { .major = 7, .minor = 38, .flags = FUSE_INIT_EXT };
	struct fuse_entry_out eo;
	struct fuse_attr_out ao;
	struct fuse_getattr_in ga = { 0 };
	struct fuse_setattr_in sa = { .valid = FATTR_UID | FATTR_GID };
	struct stat st;
	int sp[2], root, fd;
	unsigned tree;
	size_t n;
	ssize_t got;

	if (mkdtemp(dir) == NULL || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
		T_OK(0, "a directory and a socketpair");
		return;
	}
	snprintf(path, sizeof(path), "%s/f", dir);
	snprintf(path2, sizeof(path2), "%s/g", dir);
	for (int i = 0; i < 2; i++) {
		fd = open(i ? path2 : path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	T_ERR(fsrv_new(&cfg, &s), 0, "owner_as_agent: a server");
	T_ERR(fsrv_add_tree(s, root, sp[1], &tree), 0, "... a tree");
	n = req(buf, FUSE_INIT, 1, 0, &in, sizeof(in), NULL, 0);
	T_OK(ask(s, tree, sp[0], buf, n, &h, NULL, 0) > 0 && h.error == 0, "... INIT");

	n = req(buf, FUSE_LOOKUP, 2, 1, NULL, 0, "f", 2);
	memset(&eo, 0, sizeof(eo));
	got = ask(s, tree, sp[0], buf, n, &h, &eo, sizeof(eo));
	T_OK(got == (ssize_t)sizeof(eo) && h.error == 0 &&
	    eo.attr.uid == agent && eo.attr.gid == agent_g,
	    "a lookup of the owner's file shows it as the agent's (%u:%u)", eo.attr.uid, eo.attr.gid);
	/* Only the root's owner is shown as the agent (as root: another's). */
	if (getuid() == 0) {
		T_OK(chown(path2, 12345, 12345) == 0, "a file of another owner");
		n = req(buf, FUSE_LOOKUP, 9, 1, NULL, 0, "g", 2);
		memset(&eo, 0, sizeof(eo));
		got = ask(s, tree, sp[0], buf, n, &h, &eo, sizeof(eo));
		T_OK(got == (ssize_t)sizeof(eo) && eo.attr.uid == 12345 && eo.attr.gid == 12345,
		    "... another owner's file shows as that owner's (%u)", eo.attr.uid);
	}
	n = req(buf, FUSE_LOOKUP, 2, 1, NULL, 0, "f", 2);
	memset(&eo, 0, sizeof(eo));
	got = ask(s, tree, sp[0], buf, n, &h, &eo, sizeof(eo));
	n = req(buf, FUSE_GETATTR, 3, 1, &ga, sizeof(ga), NULL, 0);
	memset(&ao, 0, sizeof(ao));
	got = ask(s, tree, sp[0], buf, n, &h, &ao, sizeof(ao));
	T_OK(got == (ssize_t)sizeof(ao) && h.error == 0 &&
	    ao.attr.uid == agent && ao.attr.gid == agent_g, "... a getattr of the root too");

	sa.uid = (uint32_t)agent;
	sa.gid = (uint32_t)agent_g;
	n = req(buf, FUSE_SETATTR, 4, eo.nodeid, &sa, sizeof(sa), NULL, 0);
	memset(&ao, 0, sizeof(ao));
	got = ask(s, tree, sp[0], buf, n, &h, &ao, sizeof(ao));
	T_OK(got == (ssize_t)sizeof(ao) && h.error == 0 &&
	    ao.attr.uid == agent, "a chown to the owner it is shown is a no-op (error %d)", h.error);
	T_OK(stat(path, &st) == 0 && st.st_uid == getuid() && st.st_gid == getgid(),
	    "... and the host file keeps its owner");
	sa.uid = (uint32_t)agent + 1;
	n = req(buf, FUSE_SETATTR, 5, eo.nodeid, &sa, sizeof(sa), NULL, 0);
	got = ask(s, tree, sp[0], buf, n, &h, NULL, 0);
	T_OK(got == 0 && h.error == -EPERM,
	    "a chown to anyone else is still EPERM");

	n = req(buf, FUSE_LOOKUP, 6, 1, NULL, 0, "deep", 5);
	got = ask(s, tree, sp[0], buf, n, &h, NULL, 0);
	T_OK(got == 0 && h.error == -ENAMETOOLONG,
	    "a path the caller finds too long (CB_ETOOBIG) is ENAMETOOLONG (%d)", h.error);
	n = req(buf, FUSE_MKDIR, 7, 1, &(struct fuse_mkdir_in){ .mode = 0755 },
	    sizeof(struct fuse_mkdir_in), "odd", 4);
	got = ask(s, tree, sp[0], buf, n, &h, NULL, 0);
	T_OK(got == 0 && h.error == -EINVAL,
	    "a name it refuses to judge (CB_EINVAL) is EINVAL (%d)", h.error);
	n = req(buf, FUSE_LOOKUP, 8, 1, NULL, 0, "no", 3);
	got = ask(s, tree, sp[0], buf, n, &h, NULL, 0);
	T_OK(got == 0 && h.error == -EACCES,
	    "any other refusal is EACCES (%d)", h.error);

	fsrv_free(s);
	unlink(path);
	unlink(path2);
	rmdir(dir);
	close(root);
	close(sp[0]);
	close(sp[1]);
}

/* ---- the pool ---- */

/* One server of the pool test: its connection, its control pipe, and
 * whether its checks are held (until the test lets go). */
struct pt_srv {
	struct fsrv *s;
	int sp[2], ctl[2];
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool hold, held, freed, done;
};

static int
pt_authz(void *arg, const struct fsrv_check *c)
{
	struct pt_srv *x = arg;

	(void)c;
	pthread_mutex_lock(&x->mu);
	x->held = x->hold;
	pthread_cond_broadcast(&x->cond);
	while (x->hold)
		pthread_cond_wait(&x->cond, &x->mu);
	pthread_mutex_unlock(&x->mu);
	return 0;
}

static bool
pt_ctl(void *arg)
{
	struct pt_srv *x = arg;
	char c;

	if (read(x->ctl[0], &c, 1) != 1 || c != 'x')
		return false;
	fsrv_free(x->s);
	pthread_mutex_lock(&x->mu);
	x->freed = true;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->mu);
	return true;
}

static void
pt_done(void *arg)
{
	struct pt_srv *x = arg;

	pthread_mutex_lock(&x->mu);
	x->done = true;
	pthread_mutex_unlock(&x->mu);
}

/* An answer on fd within ms: its error, or 1 when none came. */
static int
pt_answer(int fd, uint64_t unique, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct fuse_out_header h;

	if (poll(&p, 1, ms) != 1 || answer(fd, &h, NULL, 0) < 0 || h.unique != unique)
		return 1;
	return h.error;
}

static bool
pt_new(struct pt_srv *x, int root)
{
	struct fsrv_cfg cfg = { .authz = pt_authz, .authz_arg = x, .attr_timeout = 1,
		.entry_timeout = 1, .keep_identity = true };
	struct fuse_init_in in = { .major = 7, .minor = 38 };
	_Alignas(8) char buf[256];
	unsigned tree;
	size_t n;

	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cond, NULL);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, x->sp) != 0 ||
	    pipe2(x->ctl, O_CLOEXEC) != 0 || fsrv_new(&cfg, &x->s) != 0 ||
	    fsrv_add_tree(x->s, root, x->sp[1], &tree) != 0)
		return false;
	close(x->sp[1]);
	n = req(buf, FUSE_INIT, 1, 0, &in, sizeof(in), NULL, 0);
	return send(x->sp[0], buf, n, 0) == (ssize_t)n;
}

/* Wait up to 2 s for *flag (under x->mu). */
static bool
pt_wait(struct pt_srv *x, const bool *flag)
{
	bool v = false;

	for (int i = 0; i < 200 && !v; i++) {
		pthread_mutex_lock(&x->mu);
		v = *flag;
		pthread_mutex_unlock(&x->mu);
		if (!v)
			usleep(10000);
	}
	return v;
}

static void
test_pool(void)
{
	struct fsrv_pool_cfg pc = { .min = 1, .max = 8, .idle_ms = 100 };
	struct fsrv_pool *p = NULL;
	struct pt_srv a, b;
	char dir[] = "/tmp/cb-fsrv-pool-XXXXXX";
	_Alignas(8) char buf[256];
	int root = -1;
	unsigned n;
	size_t len;

	if (mkdtemp(dir) == NULL || (root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		T_OK(0, "a directory");
		return;
	}
	T_OK(pt_new(&a, root) && pt_new(&b, root), "two servers, each with a tree");
	T_ERR(fsrv_pool_new(&pc, &p), 0, "a pool");
	T_ERR(fsrv_pool_add(p, a.s, a.ctl[0], pt_ctl, pt_done, &a), 0, "... serving the first");
	T_ERR(fsrv_pool_add(p, b.s, b.ctl[0], pt_ctl, pt_done, &b), 0, "... and the second");
	T_ERR(pt_answer(a.sp[0], 1, 2000), 0, "the first's INIT is answered");
	T_ERR(pt_answer(b.sp[0], 1, 2000), 0, "... and the second's");
	pthread_mutex_lock(&a.mu);
	a.hold = true;
	pthread_mutex_unlock(&a.mu);
	len = req(buf, FUSE_GETATTR, 2, 1, &(struct fuse_getattr_in){ 0 },
	    sizeof(struct fuse_getattr_in), NULL, 0);
	T_OK(send(a.sp[0], buf, len, 0) == (ssize_t)len && pt_wait(&a, &a.held),
	    "a getattr of the first is held in its check (its thread with it)");
	T_OK(send(b.sp[0], buf, len, 0) == (ssize_t)len, "a getattr of the second meanwhile");
	T_ERR(pt_answer(b.sp[0], 2, 2000), 0, "... is answered while the first is held");
	T_ERR(pt_answer(a.sp[0], 2, 0), 1, "... and the first is not");
	T_OK(fsrv_pool_threads(p) >= 2, "the pool grew for it (%u threads)", fsrv_pool_threads(p));
	T_ERR(fsrv_pool_free(p, 0), CB_EBUSY, "a pool with servers is not freed");
	pthread_mutex_lock(&a.mu);
	a.hold = false;
	pthread_cond_broadcast(&a.cond);
	pthread_mutex_unlock(&a.mu);
	T_ERR(pt_answer(a.sp[0], 2, 2000), 0, "let go, the first is answered");
	n = fsrv_pool_threads(p);
	for (int i = 0; i < 300 && n > pc.min; i++) {
		usleep(10000);
		n = fsrv_pool_threads(p);
	}
	T_OK(n == pc.min, "idle, the pool is back to %u thread (%u)", pc.min, n);
	T_OK(write(a.ctl[1], "x", 1) == 1 && pt_wait(&a, &a.freed) && pt_wait(&a, &a.done),
	    "the first is freed by its control function, on a pool thread, then forgotten");
	T_OK(send(b.sp[0], buf, len, 0) == (ssize_t)len && pt_answer(b.sp[0], 2, 2000) == 0,
	    "... and the second is served on");
	T_OK(write(b.ctl[1], "x", 1) == 1 && pt_wait(&b, &b.done), "the second is freed too");
	T_ERR(fsrv_pool_free(p, 2000), 0, "the pool then ends its threads and is freed");
	T_ERR(fsrv_pool_new(&pc, &p), 0, "another pool");
	n = (unsigned)fsrv_pool_free(p, 0);
	T_OK(n == 0 || (int)n == CB_ETIMEDOUT, "... freed without waiting: its last thread frees it");
	for (int i = 0; i < 2; i++) {
		struct pt_srv *x = i ? &b : &a;

		close(x->sp[0]);
		close(x->ctl[0]);
		close(x->ctl[1]);
		pthread_cond_destroy(&x->cond);
		pthread_mutex_destroy(&x->mu);
	}
	close(root);
	rmdir(dir);
}

int
main(void)
{
	test_decode();
	test_serve();
	test_owner_as_agent();
	test_pool();
	return t_done();
}
