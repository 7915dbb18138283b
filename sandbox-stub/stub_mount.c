/*
 * stub_mount.c - the sandbox's file system: a fresh root on a private tmpfs.
 *
 * Runs in capbroker-stub as pid 1 of the new pid namespace, with full
 * capabilities in the new user namespace only (none on the host), before any
 * agent code exists.  The inputs (bind sources and destinations) come from
 * the broker and were checked by stub_main.c.
 *
 * Bind sources chosen by anyone (a policy, --ro-bind, a token's fs.read
 * root, capcall and the Python client) arrive as descriptors the broker
 * opened with its own credentials through its one resolver (no symlink,
 * no magic link, no kernel file system): this file never opens a host path
 * for them.  A mount can only be cloned from the caller's own mount
 * namespace, and the sandbox's is a new one, so each source is cloned in
 * the outer stub before it drops the broker's credentials
 * (stub_capture_sources): directly, when those credentials may clone in the
 * host's mount namespace (a root broker), else by a short-lived helper per
 * source that makes the source its working directory and unshares a user
 * and mount namespace (the kernel carries the working directory over to the
 * copy of its mount).  Either way the clone (open_tree(OPEN_TREE_CLONE)) is
 * checked to be the inode the broker opened, made read-only, nosuid, nodev
 * and a slave, never a peer, of the host's mount, and kept detached.
 * Only the fixed system runtime (/usr, /bin, /lib*, /sbin, ld.so.cache, the
 * CA certificates, five /dev nodes) is still captured by path, in pid 1.
 *
 * Order matters:
 *   1. make every mount private, so nothing we do propagates to the host;
 *   2. capture every host source we need as a detached mount tree
 *      (open_tree(OPEN_TREE_CLONE)) and make it read-only, nosuid and nodev
 *      *before* it is attached anywhere: there is no window in which the
 *      sandbox could see a writable or set-uid-capable bind;
 *   3. mount the new root (a small tmpfs) over /tmp of our private mount
 *      namespace and build it: directories, synthetic /etc files, /proc,
 *      /dev, the size-limited /tmp, then attach the trees;
 *   4. make the new root read-only and pivot into it with the old root
 *      detached (pivot_root(".", ".") then umount2(".", MNT_DETACH)).
 * Mount points for binds are created without following symlinks and never
 * inside a directory that belongs to a host bind (which would write to it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <signal.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "fsrv/fsrv.h"
#include "sandbox-stub/stub_int.h"
#include "wire/packet.h"

#define NR		"/tmp"		/* where the new root is built */
#define NR_PATH(p)	NR p

/* The tmpfs mounts we made: the only places mount points may be created. */
static dev_t stub_own_dev[4];
static size_t stub_nown;

/* --mount-later: a detached, writable clone of the new root's tmpfs (pid 1
 * only: close-on-exec, and the agent execs before it runs anything), and
 * that tmpfs's device. */
static int stub_root_rw = -1;
static dev_t stub_root_dev;

/* --fuse-at and --fuse-slots: the connections pid 1 opened (the trees',
 * then the slots'), until stub_mount_send_fuse. */
static int stub_fuse_dev[SBX_MOUNTS_MAX + SBX_SLOTS_MAX];

/* The slots (--slot-fd, --fuse-slots): detached mounts, -1 once used. */
static int stub_slot[SBX_SLOTS_MAX];
static size_t stub_nslot;

static bool
own_dev(dev_t d)
{
	for (size_t i = 0; i < stub_nown; i++) {
		if (stub_own_dev[i] == d)
			return true;
	}
	return false;
}

/* A host object to show inside: captured tree, then its place. */
struct stub_tree {
	int fd;			/* detached mount tree, -1 if not present */
	bool dir;
	char link[PATH_MAX];	/* or, if set: make dst a symlink to this */
	char dst[PATH_MAX];	/* absolute path inside the sandbox */
};

static void
set_attr(int fd, const char *path, unsigned flags, uint64_t set, const char *what)
{
	struct mount_attr a = { .attr_set = set };

	if (mount_setattr(fd, path, flags, &a, sizeof(a)) == -1)
		stub_die(errno, "mount_setattr %.200s", what);
}

/* Clone the host object at src (symlinks followed: the broker chose it) as a
 * detached tree with attributes attr.  optional: a missing src is skipped. */
static void
capture(struct stub_tree *t, const char *src, const char *dst, uint64_t attr,
    bool optional)
{
	struct stat st;

	t->fd = -1;
	t->link[0] = '\0';
	if (snprintf(t->dst, sizeof(t->dst), "%s", dst) >= (int)sizeof(t->dst))
		stub_die(0, "path too long: %.200s", dst);
	t->fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (t->fd == -1) {
		if (optional && errno == ENOENT)
			return;
		stub_die(errno, "bind source %.200s", src);
	}
	/* The type of what was captured, not of what the path names now. */
	if (fstat(t->fd, &st) == -1)
		stub_die(errno, "fstat %.200s", src);
	/* Devices only where the caller asked for device semantics (no nodev). */
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) &&
	    !(S_ISCHR(st.st_mode) && (attr & MOUNT_ATTR_NODEV) == 0))
		stub_die(0, "bind source is not a file or directory: %.200s", src);
	t->dir = S_ISDIR(st.st_mode);
	set_attr(t->fd, "", AT_EMPTY_PATH | AT_RECURSIVE, attr, src);
}

/* ------------------------------------------------ sources from the broker */

static void
send_tree(int sock, int fd)
{
	char b = 'T';

	if (wire_packet_send(sock, &b, 1, &fd, 1, MSG_NOSIGNAL) == 1)
		return;
	/* The stub is gone (another source failed and it said why): nothing
	 * to add.  It never takes a tree from a helper that exits 1. */
	if (errno == EPIPE || errno == ECONNRESET)
		_exit(1);
	stub_die(errno, "passing a bind tree");
}

static int
recv_tree(int sock)
{
	struct wire_packet pk;
	char b;

	if (wire_packet_recv(sock, &b, 1, 0, &pk) != 1 || pk.nfds != 1 || pk.ctrunc || pk.trunc) {
		wire_packet_close(&pk);
		return -1;
	}
	return pk.fds[0];
}

/* Clone src, named relative to dir (the broker's directory, or the working
 * directory a helper carried into its copy of the mount namespace), check
 * it is the inode the broker opened and give it attr and propagation prop.
 * Returns the detached tree; with may_refuse, -1 if the kernel refused the
 * clone for want of privilege over this mount namespace (EPERM). */
static int
clone_source(const struct stub_src *src, int dir, const char *what, uint64_t attr,
    uint64_t prop, bool may_refuse)
{
	bool self = strcmp(src->name, ".") == 0;
	struct mount_attr a = { .attr_set = attr, .propagation = prop };
	struct stat want, got;
	int tree;

	if (fstat(src->fd, &want) == -1)
		stub_die(errno, "bind source %.200s", what);
	if (!S_ISDIR(want.st_mode) && !S_ISREG(want.st_mode))
		stub_die(0, "bind source is not a file or directory: %.200s", what);
	tree = open_tree(dir, self ? "" : src->name, (self ? AT_EMPTY_PATH :
	    AT_SYMLINK_NOFOLLOW) | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree == -1 && may_refuse && errno == EPERM)
		return -1;
	if (tree == -1)
		stub_die(errno, "bind source %.200s", what);
	/* The name may have been replaced since the broker opened it. */
	if (fstat(tree, &got) == -1 || got.st_dev != want.st_dev || got.st_ino != want.st_ino)
		stub_die(0, "bind source %.200s changed while it was bound", what);
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) == -1)
		stub_die(errno, "mount_setattr %.200s", what);
	return tree;
}

/* The helper: clone src (see the top of this file) and send the tree. */
static void __attribute__((noreturn))
clone_helper(const struct stub_src *src, const char *what, uint64_t attr, int sock)
{
	if (fchdir(src->dirfd) == -1)
		stub_die(errno, "bind source %.200s", what);
	/* The copy of the mount namespace carries the working directory over
	 * to its copy of the mount: that is the one we may clone.  The copy's
	 * mounts are slaves of the host's shared ones (the kernel makes them
	 * so for a less privileged owner), and so is the clone. */
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1)
		stub_die(errno, "bind source %.200s: unshare", what);
	send_tree(sock, clone_source(src, AT_FDCWD, what, attr, 0, false));
	_exit(0);
}

/* A source being cloned: its helper and the socket its tree comes on. */
struct capture_job {
	struct stub_src *src;
	const char *what;
	uint64_t attr;
	pid_t pid;
	int sock;
};

static void
capture_start(struct capture_job *j, int min_fd)
{
	int sv[2];

	if (j->src->dirfd < min_fd || j->src->fd < min_fd)
		stub_die(0, "bind source %.200s: bad descriptor", j->what);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		stub_die(errno, "socketpair");
	j->pid = fork();
	if (j->pid == -1)
		stub_die(errno, "fork");
	if (j->pid == 0) {
		close(sv[0]);
		clone_helper(j->src, j->what, j->attr, sv[1]);
	}
	close(sv[1]);
	j->sock = sv[0];
}

static void
capture_reap(const struct capture_job *j)
{
	int st;

	while (waitpid(j->pid, &st, 0) == -1) {
		if (errno != EINTR)
			stub_die(errno, "waitpid");
	}
	/* The helper has said why on the status descriptor already. */
	if (j->src->tree == -1 && WIFEXITED(st) && WEXITSTATUS(st) == SBX_EXIT_SETUP)
		_exit(SBX_EXIT_SETUP);
	if (j->src->tree == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		stub_die(0, "bind source %.200s: the clone helper failed", j->what);
}

/* Take the tree of jobs[k].  A helper that sent none is waited for now
 * (its exit says why), once every other helper started is reaped (those
 * still at work, jobs[k + 1 .. started), killed first): none outlives the
 * stub in the sandbox's cgroups.  One that sent its tree is reaped later
 * (capture_reap): its exit is its mount namespace's teardown, which need
 * not hold us up. */
static void
capture_finish(struct capture_job *jobs, size_t k, size_t started)
{
	struct capture_job *j = &jobs[k];
	struct stub_src *src = j->src;

	src->tree = recv_tree(j->sock);
	close(j->sock);
	j->sock = -1;
	if (src->tree == -1) {
		for (size_t i = 0; i < started; i++) {
			if (i == k)
				continue;
			if (i > k)
				kill(jobs[i].pid, SIGKILL);
			while (waitpid(jobs[i].pid, NULL, 0) == -1 && errno == EINTR)
				;
		}
		capture_reap(j);	/* dies, saying why */
	}
	close(src->fd);
	if (src->dirfd != src->fd)
		close(src->dirfd);
	src->fd = src->dirfd = -1;
}

/* Up to STUB_CAPTURE_AHEAD helpers run at once: each waits for a CPU and
 * copies a mount namespace, and those waits overlap (a low-tier sandbox
 * has two sources, capcall and the Python client).  Every helper is
 * reaped before we return, so none outlives the capture in the
 * sandbox's pids cgroup.  Each helper checks its own source (the inode
 * the broker opened) and the first failure ends the stub, as before;
 * which of two failing sources is named first is no longer fixed. */
#define STUB_CAPTURE_AHEAD 4

void
stub_capture_sources(struct stub_cfg *c)
{
	const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	int min_fd = STUB_FD_CGROUP0 + c->ncgroup;
	struct capture_job jobs[STUB_MAX_BINDS + 3];
	size_t n = 0, started = 0, done = 0;

	if (c->capcall != NULL)
		jobs[n++] = (struct capture_job){ &c->capcall_src, c->capcall, ro, -1, -1 };
	if (c->pylib != NULL)
		jobs[n++] = (struct capture_job){ &c->pylib_src, c->pylib, ro, -1, -1 };
	if (c->hosts != NULL)
		jobs[n++] = (struct capture_job){ &c->hosts_src, c->hosts, ro, -1, -1 };
	for (size_t i = 0; i < c->nbinds; i++)
		jobs[n++] = (struct capture_job){ &c->bsrc[i], c->binds[i].dst,
		    c->binds[i].writable ? MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV : ro, -1, -1 };
	/* A stub with the broker's privilege over the host's mount namespace
	 * (a root broker) clones every source itself: no helper, no namespace
	 * copied and torn down per source.  The tree is made a slave, as a
	 * helper's clone is: a host mount event may reach it, nothing mounted
	 * in it reaches the host.  Refused (EPERM): the helpers below. */
	for (; done < n; done++) {
		struct stub_src *src = jobs[done].src;

		if (src->dirfd < min_fd || src->fd < min_fd)
			stub_die(0, "bind source %.200s: bad descriptor", jobs[done].what);
		src->tree = clone_source(src, src->dirfd, jobs[done].what, jobs[done].attr,
		    MS_SLAVE, done == 0);
		if (src->tree == -1)
			break;
		close(src->fd);
		if (src->dirfd != src->fd)
			close(src->dirfd);
		src->fd = src->dirfd = -1;
	}
	while (done < n) {
		while (started < n && started - done < STUB_CAPTURE_AHEAD)
			capture_start(&jobs[started++], min_fd);
		capture_finish(jobs, done++, started);
	}
	for (size_t i = 0; i < started; i++)
		capture_reap(&jobs[i]);
}

/* Take over a tree stub_capture_sources made. */
static void
adopt(struct stub_tree *t, const struct stub_src *src, const char *dst)
{
	struct stat st;

	t->link[0] = '\0';
	if (snprintf(t->dst, sizeof(t->dst), "%s", dst) >= (int)sizeof(t->dst))
		stub_die(0, "path too long: %.200s", dst);
	t->fd = src->tree;	/* attach() closes it */
	if (t->fd == -1 || fstat(t->fd, &st) == -1)
		stub_die(errno, "bind %.200s", dst);
	t->dir = S_ISDIR(st.st_mode);
}

/* Create the mount point for path (inside the new root) and every missing
 * parent, refusing symlinks and refusing to create anything that is not on
 * the new root's own tmpfs.  Returns an O_PATH descriptor of the point. */
static int
make_point(const char *path, bool dir)
{
	char buf[PATH_MAX];
	char *comp, *next, *save = NULL;
	struct stat st;
	int cur, fd;

	if (snprintf(buf, sizeof(buf), "%s", path + 1) >= (int)sizeof(buf))
		stub_die(0, "path too long");
	cur = open(NR, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur == -1)
		stub_die(errno, "new root");
	for (comp = strtok_r(buf, "/", &save); comp != NULL; comp = next) {
		bool last;

		next = strtok_r(NULL, "/", &save);
		last = (next == NULL);
		fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd == -1 && errno == ENOENT) {
			if (fstat(cur, &st) == -1)
				stub_die(errno, "fstat");
			if (!own_dev(st.st_dev))
				stub_die(0, "mount point %.200s would be created inside a bound "
				    "host directory", path);
			if (last && !dir) {
				fd = openat(cur, comp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW |
				    O_CLOEXEC, 0444);
				if (fd != -1) {
					close(fd);
				}
			} else if (mkdirat(cur, comp, 0755) == -1) {
				stub_die(errno, "mkdir %.200s", path);
			}
			fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd == -1)
			stub_die(errno, "mount point %.200s", path);
		if (fstat(fd, &st) == -1)
			stub_die(errno, "fstat %.200s", path);
		if (S_ISLNK(st.st_mode))
			stub_die(0, "mount point %.200s goes through a symlink", path);
		if (!last && !S_ISDIR(st.st_mode))
			stub_die(0, "mount point %.200s: parent is not a directory", path);
		if (last && dir != S_ISDIR(st.st_mode))
			stub_die(0, "mount point %.200s: file/directory mismatch", path);
		close(cur);
		cur = fd;
	}
	return cur;
}

static void
make_symlink(const char *target, const char *path)
{
	if (symlink(target, path) == -1)
		stub_die(errno, "symlink %s", path);
}

static void
attach(struct stub_tree *t)
{
	int point;

	if (t->link[0] != '\0') {
		make_symlink(t->link, t->dst);
		return;
	}
	if (t->fd == -1)
		return;
	point = make_point(t->dst, t->dir);
	if (move_mount(t->fd, "", point, "", MOVE_MOUNT_F_EMPTY_PATH |
	    MOVE_MOUNT_T_EMPTY_PATH) == -1)
		stub_die(errno, "move_mount %.200s", t->dst);
	close(point);
	close(t->fd);
	t->fd = -1;
}

static void
mount_tmpfs(const char *path, unsigned long flags, const char *opts)
{
	struct stat st;

	if (mount("tmpfs", path, "tmpfs", flags | MS_SILENT, opts) == -1)
		stub_die(errno, "mount tmpfs on %s", path);
	if (stat(path, &st) == -1)
		stub_die(errno, "stat %s", path);
	if (stub_nown < sizeof(stub_own_dev) / sizeof(stub_own_dev[0]))
		stub_own_dev[stub_nown++] = st.st_dev;
}

static void
make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) == -1 && errno != EEXIST)
		stub_die(errno, "mkdir %s", path);
}

static void
make_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
	size_t n = strlen(text);

	if (fd == -1 || write(fd, text, n) != (ssize_t)n)
		stub_die(errno, "creating %s", path);
	close(fd);
}

/* Mirror a top-level /bin, /lib... of the host: a symlink is copied (merged
 * /usr), a directory is bound read-only, a missing one is skipped. */
static void
capture_toplevel(struct stub_tree *t, const char *name)
{
	char host[32], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	t->fd = -1;
	t->link[0] = '\0';
	snprintf(host, sizeof(host), "/%s", name);
	if (lstat(host, &st) == -1) {
		if (errno == ENOENT)
			return;
		stub_die(errno, "%s", host);
	}
	if (S_ISLNK(st.st_mode)) {
		n = readlink(host, target, sizeof(target) - 1);
		if (n <= 0)
			stub_die(errno, "readlink %s", host);
		target[n] = '\0';
		/* Made in the new root later: nothing is written to the host. */
		snprintf(t->link, sizeof(t->link), "%s", target);
		snprintf(t->dst, sizeof(t->dst), NR "/%s", name);
		return;
	}
	capture(t, host, host, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
}

/* Limit namespace creation inside to nothing: seccomp already refuses
 * unshare/setns/clone with namespace flags, this makes the kernel refuse
 * too.  The values are per user namespace and we own ours. */
static void
forbid_namespaces(void)
{
	static const char *const ns[] = { "user", "mnt", "pid", "net", "ipc", "uts",
	    "cgroup", "time" };
	char path[64];
	int fd;

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		snprintf(path, sizeof(path), "/proc/sys/user/max_%s_namespaces", ns[i]);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd == -1 && errno == ENOENT)
			continue;	/* an older kernel without this kind */
		if (fd == -1 || write(fd, "0", 1) != 1)
			stub_die(errno, "limiting %s", path);
		close(fd);
	}
}

static void
write_etc(const struct stub_cfg *c)
{
	/* agent_env (stub_main.c) names the user as this does: keep them one. */
	char buf[256];
	bool nobody = (c->uid == 65534);

	snprintf(buf, sizeof(buf), "%s:x:%u:%u:capbroker agent:/tmp:/bin/sh\n",
	    nobody ? "nobody" : "agent", (unsigned)c->uid, (unsigned)c->gid);
	make_file(NR_PATH("/etc/passwd"), buf, 0644);
	snprintf(buf, sizeof(buf), "%s:x:%u:\n", nobody ? "nogroup" : "agent",
	    (unsigned)c->gid);
	make_file(NR_PATH("/etc/group"), buf, 0644);
	/* With mediated connect(), the broker's list of the names its tokens
	 * grant (broker/hosts.c), rewritten as they change, then the broker's
	 * resolver (broker/dns.c): asked over TCP (use-vc), as UDP sockets do
	 * not exist here; its connect() reaches the broker, never the host's
	 * 127.0.0.53. */
	if (c->hosts != NULL) {
		make_file(NR_PATH("/etc/nsswitch.conf"),
		    "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n", 0644);
		make_symlink("/capbroker/net/hosts", NR_PATH("/etc/hosts"));
		make_file(NR_PATH("/etc/resolv.conf"),
		    "nameserver 127.0.0.53\noptions use-vc timeout:5 attempts:1\n", 0644);
	} else {
		make_file(NR_PATH("/etc/nsswitch.conf"),
		    "passwd: files\ngroup: files\nshadow: files\nhosts: files\n", 0644);
		make_file(NR_PATH("/etc/hosts"), "127.0.0.1 localhost\n::1 localhost\n", 0644);
	}
	snprintf(buf, sizeof(buf), "%s\n", c->id);
	make_file(NR_PATH("/etc/hostname"), buf, 0644);
}

enum { T_USR, T_BIN, T_LIB, T_LIB64, T_SBIN, T_LDCACHE, T_CERTS, T_ALT, T_CAPCALL,
	T_PYLIB, T_HOSTS, T_DEV0, T_NSYS = T_DEV0 + 5 };
static const char *const stub_devs[] = { "null", "zero", "full", "random", "urandom" };

/* The few character devices an agent may use, captured from the host
 * read-only; anything that is not a character device is refused. */
static void
capture_devices(struct stub_tree dev[static 5])
{
	char path[64];
	struct stat st;

	for (size_t i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "/dev/%s", stub_devs[i]);
		/* Devices must not be nodev; they are read-only so their inode
		 * cannot be changed, which does not stop writes to the device. */
		capture(&dev[i], path, path,
		    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false);
		if (fstat(dev[i].fd, &st) == -1 || !S_ISCHR(st.st_mode))
			stub_die(0, "%s is not a character device", path);
	}
}

/* The host's time zone, only when it is a symlink into /usr (which the
 * agent sees anyway): nothing else of the host's /etc leaks in. */
static void
link_localtime(void)
{
	struct stat st;

	if (lstat("/etc/localtime", &st) == 0 && S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink("/etc/localtime", target, sizeof(target) - 1);

		if (n > 0 && target[0] == '/' && strncmp(target, "/usr/", 5) == 0) {
			target[n] = '\0';
			make_symlink(target, NR_PATH("/etc/localtime"));
		}
	}
}

/* The new root's /dev: a small tmpfs with the captured devices, the
 * stdio links, /dev/shm and (with --pty) a private devpts, then made
 * read-only.  Where a tier may fork, /dev/shm is a link to the sandbox's
 * own /tmp: POSIX semaphores and shared memory (sem_open, shm_open) live
 * there, so without it Python's multiprocessing (a Lock, a Pool,
 * ProcessPoolExecutor) and shared_memory failed with ENOENT.  Nothing new
 * is reached: the objects are files of the private /tmp, within its size. */
static void
mount_dev(const struct stub_cfg *c, struct stub_tree dev[static 5])
{
	mount_tmpfs(NR_PATH("/dev"), MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64");
	make_symlink("/proc/self/fd", NR_PATH("/dev/fd"));
	make_symlink("/proc/self/fd/0", NR_PATH("/dev/stdin"));
	make_symlink("/proc/self/fd/1", NR_PATH("/dev/stdout"));
	make_symlink("/proc/self/fd/2", NR_PATH("/dev/stderr"));
	if (c->tier != SBX_TIER_LOW)
		make_symlink("/tmp", NR_PATH("/dev/shm"));
	if (c->pty) {
		make_dir(NR_PATH("/dev/pts"), 0755);
		if (mount("devpts", NR_PATH("/dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC |
		    MS_SILENT, "newinstance,ptmxmode=0666,mode=0620") == -1)
			stub_die(errno, "mount /dev/pts");
		make_symlink("pts/ptmx", NR_PATH("/dev/ptmx"));
	}
	for (size_t i = 0; i < 5; i++)
		attach(&dev[i]);
	set_attr(AT_FDCWD, NR_PATH("/dev"), 0, MOUNT_ATTR_RDONLY, "/dev");
}

/*
 * --fuse-at: a file-server tree for a broker that is not root.  The kernel
 * mounts a /dev/fuse only in the user namespace it was opened in, so pid 1
 * opens it here (the host's device node, still visible: the root has not
 * moved yet; its mode must let the sandbox's uid in) and makes the detached
 * mount itself, usable by the agent's uid only, nosuid and nodev
 * (fsrv_mount_detached, the broker's own); the broker gets the connection
 * (stub_mount_send_fuse) and serves it with the same checks as its own.
 * Neither way possible: the sandbox does not start, and says why.
 */
static void
fuse_mount(const struct stub_cfg *c, const char *dst, struct stub_tree *t, int *dev)
{
	struct fsrv_mount_opts mo = { .user_id = c->uid, .group_id = c->gid };
	int r;

	*dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (*dev == -1)
		stub_die(errno, "the file server cannot serve %.200s: a broker that is not root "
		    "needs /dev/fuse usable by uid %u inside the sandbox (mode 0666), and a root "
		    "broker mounts it itself; run capbroker as root, or make /dev/fuse usable",
		    dst, (unsigned)c->uid);
	if ((r = fsrv_mount_detached(*dev, &mo, &t->fd)) != 0)
		stub_die(r == CB_EIO || r == CB_EPERM ? errno : 0, "the file server cannot mount "
		    "%.200s in the sandbox%s%s", dst, r == CB_EIO || r == CB_EPERM ? "" : ": ",
		    r == CB_EIO || r == CB_EPERM ? "" : cb_strerror(r));
	t->dir = true;
	t->link[0] = '\0';
	if (snprintf(t->dst, sizeof(t->dst), "%s", dst) >= (int)sizeof(t->dst))
		stub_die(0, "path too long: %.200s", dst);
}

/* --fuse-slots: slot i, made like a --fuse-at tree (fuse_mount) but
 * attached nowhere yet: pid 1 keeps it until the broker names its tree. */
static void
fuse_slot(const struct stub_cfg *c, size_t i)
{
	struct stub_tree t;

	fuse_mount(c, "/ (a slot for trees granted later)", &t, &stub_fuse_dev[c->nfuse + i]);
	stub_slot[stub_nslot++] = t.fd;
}

size_t
stub_mount_nslots(void)
{
	return stub_nslot;
}

int
stub_mount_slot_fd(size_t i)
{
	return i < stub_nslot ? stub_slot[i] : -1;
}

int
stub_mount_slot(size_t i, const char *dst, char *why, size_t whylen)
{
	int r;

	if (i >= stub_nslot || stub_slot[i] == -1) {
		snprintf(why, whylen, "no such slot, or used already");
		return -1;
	}
	r = stub_mount_late(stub_slot[i], dst, why, whylen);
	/*
	 * The kernel made the root inode of a FUSE mount owned by uid 0 of
	 * the user namespace it was mounted in, until the server's first
	 * answer about it.  pid 1's own slots (a broker that is not root) are
	 * mounted in the sandbox's namespace, where uid 0 is not mapped, and
	 * the kernel refuses every write to a directory whose owner is not
	 * mapped (EACCES) before the server is asked: so a create or mkdir at
	 * the top of the tree would fail until something stat'ed it.  The
	 * broker filled the slot before asking, so one stat makes the kernel
	 * take the tree root's real attributes.  A child of pid 1 makes it and
	 * exits (pid 1 reaps it with the others): the stat waits for the
	 * broker's server, which an agent can keep busy (an audit budget
	 * spent), and pid 1 must never wait on anything the agent drives
	 * (it enforces the wall clock).  Its outcome does not matter (a tree
	 * no grant lets see is refused anyway); without a process to spare,
	 * the agent's own first look at the tree does the same.
	 */
	if (r == 0 && fork() == 0) {
		struct stat st;

		(void)!fstat(stub_slot[i], &st);
		_exit(0);
	}
	close(stub_slot[i]);
	stub_slot[i] = -1;
	return r;
}

void
stub_mount_send_fuse(const struct stub_cfg *c)
{
	size_t n = c->nfuse + c->fuse_slots;

	/* In order, as many to a packet as a packet carries (take_fuse). */
	for (size_t i = 0; i < n; i += WIRE_PACKET_FDS) {
		size_t k = n - i < WIRE_PACKET_FDS ? n - i : WIRE_PACKET_FDS;

		if (wire_packet_send(STUB_FD_STATUS, "fuse", 4, stub_fuse_dev + i, k,
		    MSG_NOSIGNAL) != 4)
			stub_die(errno, "passing the file server's connections to the broker");
	}
	for (size_t i = 0; i < n; i++)
		close(stub_fuse_dev[i]);
}

/* 2. Every host object, captured read-only before anything is hidden. */
static void
capture_all(const struct stub_cfg *c, struct stub_tree *sys, struct stub_tree *user,
    struct stub_tree *served)
{
	const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

	capture(&sys[T_USR], "/usr", "/usr", ro, false);
	capture_toplevel(&sys[T_BIN], "bin");
	capture_toplevel(&sys[T_LIB], "lib");
	capture_toplevel(&sys[T_LIB64], "lib64");
	capture_toplevel(&sys[T_SBIN], "sbin");
	/* Created below over the tmpfs; the order of the two steps matters. */
	capture(&sys[T_LDCACHE], "/etc/ld.so.cache", "/etc/ld.so.cache", ro, true);
	capture(&sys[T_CERTS], "/etc/ssl/certs", "/etc/ssl/certs", ro, true);
	/* Debian's alternatives (cc, awk, ld...): only symlinks into /usr. */
	capture(&sys[T_ALT], "/etc/alternatives", "/etc/alternatives", ro, true);
	sys[T_CAPCALL].fd = sys[T_PYLIB].fd = sys[T_HOSTS].fd = -1;
	sys[T_CAPCALL].link[0] = sys[T_PYLIB].link[0] = sys[T_HOSTS].link[0] = '\0';
	if (c->capcall != NULL)
		adopt(&sys[T_CAPCALL], &c->capcall_src, "/capbroker/bin/capcall");
	if (c->pylib != NULL)
		adopt(&sys[T_PYLIB], &c->pylib_src, "/capbroker/python");
	if (c->hosts != NULL)
		adopt(&sys[T_HOSTS], &c->hosts_src, "/capbroker/net");
	capture_devices(&sys[T_DEV0]);
	for (size_t i = 0; i < c->nbinds; i++)
		adopt(&user[i], &c->bsrc[i], c->binds[i].dst);
	/* The broker's file server mounts: directories by construction (a
	 * FUSE root); no fstat here, which would be a request to the server
	 * before the tree is in place. */
	for (size_t i = 0; i < c->nmounts; i++) {
		served[i].fd = c->mounts[i].fd;
		served[i].dir = true;
		served[i].link[0] = '\0';
		if (snprintf(served[i].dst, sizeof(served[i].dst), "%s", c->mounts[i].dst) >=
		    (int)sizeof(served[i].dst))
			stub_die(0, "path too long: %.200s", c->mounts[i].dst);
	}
	for (size_t i = 0; i < c->nfuse; i++)
		fuse_mount(c, c->fuse_at[i], &served[c->nmounts + i], &stub_fuse_dev[i]);
	/* Slots: the broker's, or made here as the trees above are. */
	for (size_t i = 0; i < c->nslot_fds; i++)
		stub_slot[stub_nslot++] = c->slot_fds[i];
	for (size_t i = 0; i < c->fuse_slots; i++)
		fuse_slot(c, i);
}

/* 4. Read-only root, then pivot with the old root detached. */
static void
pivot_into(const struct stub_cfg *c)
{
	set_attr(AT_FDCWD, NR, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	    "new root");
	if (sethostname(c->id, strlen(c->id)) == -1)
		stub_die(errno, "sethostname");
	if (chdir(NR) == -1)
		stub_die(errno, "chdir new root");
	if (syscall(SYS_pivot_root, ".", ".") == -1)
		stub_die(errno, "pivot_root");
	if (umount2(".", MNT_DETACH) == -1)
		stub_die(errno, "detaching the old root");
	if (chdir("/") == -1)
		stub_die(errno, "chdir /");
}

void
stub_mount_setup(const struct stub_cfg *c)
{
	static struct stub_tree sys[T_NSYS], user[STUB_MAX_BINDS], served[2 * SBX_MOUNTS_MAX];
	char opts[128];

	/* 1. Nothing below propagates to the host's mount namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE | MS_SILENT, NULL) == -1)
		stub_die(errno, "making mounts private");

	capture_all(c, sys, user, served);

	/* 3. The new root. */
	mount_tmpfs(NR, MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=1024");
	if (c->mount_later) {
		/* Taken before the root is made read-only (a clone keeps the
		 * flags of its moment) and before forbid_namespaces (a clone
		 * is a mount namespace of its own). */
		stub_root_rw = open_tree(AT_FDCWD, NR, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (stub_root_rw == -1)
			stub_die(errno, "cloning the new root for later mounts");
		stub_root_dev = stub_own_dev[stub_nown - 1];
	}
	make_dir(NR_PATH("/usr"), 0755);
	make_dir(NR_PATH("/etc"), 0755);
	make_dir(NR_PATH("/proc"), 0555);
	make_dir(NR_PATH("/dev"), 0755);
	make_dir(NR_PATH("/tmp"), 01777);
	make_dir(NR_PATH("/capbroker"), 0755);
	make_dir(NR_PATH("/capbroker/bin"), 0755);
	write_etc(c);
	link_localtime();

	if (mount("proc", NR_PATH("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC |
	    MS_SILENT, "subset=pid") == -1)
		stub_die(errno, "mount /proc");

	mount_dev(c, &sys[T_DEV0]);

	snprintf(opts, sizeof(opts), "mode=1777,size=%llu,nr_inodes=%llu",
	    (unsigned long long)c->lim.tmp_bytes,
	    (unsigned long long)(c->lim.tmp_bytes / 4096 < 1024 ? 1024 : c->lim.tmp_bytes / 4096));
	mount_tmpfs(NR_PATH("/tmp"), MS_NOSUID | MS_NODEV |
	    (c->tier == SBX_TIER_HIGH ? 0 : MS_NOEXEC), opts);

	for (size_t i = 0; i < T_DEV0; i++)
		attach(&sys[i]);
	for (size_t i = 0; i < c->nbinds; i++)
		attach(&user[i]);
	for (size_t i = 0; i < c->nmounts + c->nfuse; i++)
		attach(&served[i]);
}

void
stub_mount_pivot(const struct stub_cfg *c)
{
	/* Last: open_tree() clones above count as mount namespaces, and so
	 * does the outer stub's network namespace, which must exist by now
	 * (the limit is the sandbox's user namespace's, which it is in). */
	forbid_namespaces();

	pivot_into(c);
}

void
stub_mount_set_id(const struct stub_cfg *c)
{
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };
	char buf[SBX_ID_MAX + 2];
	int fd, n;

	if (sethostname(c->id, strlen(c->id)) == -1)
		stub_die(errno, "sethostname");
	/* Only pid 1 can do this (the agent does not exist yet and will have
	 * no capability); the root's other attributes stay as they are. */
	if (mount_setattr(AT_FDCWD, "/", 0, &rw, sizeof(rw)) == -1)
		stub_die(errno, "mount_setattr / (rw)");
	n = snprintf(buf, sizeof(buf), "%s\n", c->id);
	fd = open("/etc/hostname", O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || write(fd, buf, (size_t)n) != n)
		stub_die(errno, "/etc/hostname");
	close(fd);
	set_attr(AT_FDCWD, "/", 0, MOUNT_ATTR_RDONLY, "/ (ro)");
}

/* ------------------------------------------- mounts while the agent runs */

/* Open comp beneath dir without following a symlink and without leaving
 * dir's mount.  Not cb_openat2: that one may cross mounts below its start,
 * and refusing to is the whole point here. */
static int
open_beneath(int dir, const char *comp)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
		    RESOLVE_NO_XDEV,
	};

	return (int)syscall(SYS_openat2, dir, comp, &how, sizeof(how));
}

static bool
same_dir(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && S_ISDIR(sa.st_mode) &&
	    sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && sa.st_dev == stub_root_dev;
}

/*
 * Why this is safe while the agent runs: every component of dst is walked
 * twice, in the live view from "/" and in the writable clone, each with
 * openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV), and both must be the same
 * directory of the root's tmpfs.  The agent cannot write that tmpfs (a
 * read-only mount, and Landlock), so it cannot plant a symlink or a
 * directory there; anything it can write (/tmp, a served tree) is another
 * mount, which RESOLVE_NO_XDEV refuses to enter.  Missing directories are
 * made through the clone only, so the live root is never writable, not even
 * for a moment.
 */
int
stub_mount_late(int mnt_fd, const char *dst, char *why, size_t whylen)
{
	char buf[PATH_MAX];
	char *comp, *save = NULL;
	const char *no;
	int live = -1, rw = -1, nl = -1, nr = -1, ret = -1;

	if (stub_root_rw == -1) {
		snprintf(why, whylen, "no later mounts in this sandbox");
		return -1;
	}
	if ((no = sbx_bind_dst_refusal(dst)) != NULL) {
		snprintf(why, whylen, "destination refused: %s", no);
		return -1;
	}
	if (snprintf(buf, sizeof(buf), "%s", dst + 1) >= (int)sizeof(buf)) {
		snprintf(why, whylen, "path too long");
		return -1;
	}
	live = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	rw = fcntl(stub_root_rw, F_DUPFD_CLOEXEC, 0);
	if (live == -1 || rw == -1 || !same_dir(live, rw)) {
		snprintf(why, whylen, "the root: %s", strerror(errno));
		goto out;
	}
	for (comp = strtok_r(buf, "/", &save); comp != NULL; comp = strtok_r(NULL, "/", &save)) {
		nl = open_beneath(live, comp);
		if (nl == -1 && errno == ENOENT) {
			if (mkdirat(rw, comp, 0755) == -1 && errno != EEXIST) {
				snprintf(why, whylen, "mkdir %s: %s", comp, strerror(errno));
				goto out;
			}
			nl = open_beneath(live, comp);
		}
		if (nl == -1) {
			snprintf(why, whylen, "%s: %s", comp, errno == EXDEV ?
			    "inside another mount (/tmp, a bind, a served tree)" : errno == ELOOP ?
			    "a symlink" : strerror(errno));
			goto out;
		}
		nr = open_beneath(rw, comp);
		if (nr == -1 || !same_dir(nl, nr)) {
			snprintf(why, whylen, "%s: not a directory of the sandbox's root", comp);
			goto out;
		}
		close(live);
		close(rw);
		live = nl;
		rw = nr;
		nl = nr = -1;
	}
	if (move_mount(mnt_fd, "", live, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == -1) {
		snprintf(why, whylen, "move_mount: %s", strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (nl != -1)
		close(nl);
	if (nr != -1)
		close(nr);
	if (live != -1)
		close(live);
	if (rw != -1)
		close(rw);
	return ret;
}
