/*
 * test_broker_start.c - a sandbox whose "sandbox.start" line the audit log
 * refuses does not start (broker/sbx.c, brk_sbx_start_line): the held
 * stub is killed unstarted and brk_sbx_finish fails with the reason,
 * which `run` prints and exits 125 on.  The start is driven as `run`
 * drives it (broker/main.c, run_start: brk_new_early, brk_sbx_begin,
 * brk_open, brk_sbx_finish), on a real broker and a real held stub
 * ($CB_BIN/capbroker-stub, else bin/).  Test code (trusted).
 *
 * The refusal comes from a ring a slow disk let fill after admission:
 * the admission's aud_room looks at the log's reserve, which the reserver
 * keeps extending whatever the writer does, not at the ring.  Made
 * deterministic here, with no seam in the product: fdatasync is defined
 * in this executable (as tests/unit/test_audit_slow.c does), and while
 * armed a sync of the audit log waits until it is released, so the
 * writer drains nothing and the ring stays full for as long as the test
 * wants.  Every other sync (the state database's) goes through at once.
 * Before the fix the start line was only counted as unlogged and the
 * agent told to go: brk_sbx_finish returned 0.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "audit/audit.h"
#include "broker/broker.h"
#include "broker/core.h"
#include "broker/sbx.h"
#include "tests/tap.h"

static char dir[] = "/tmp/test_broker_start.XXXXXX";

static pthread_mutex_t sync_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_cv = PTHREAD_COND_INITIALIZER;
static bool sync_held;		/* under sync_mu: syncs of the log wait */
static atomic_int sync_waiting;	/* syncs of the log waiting now */

/* Is fd the audit log (STATE/audit.jsonl)? */
static bool
is_audit_log(int fd)
{
	char link[64], path[PATH_MAX];
	ssize_t n;
	size_t len = strlen("/audit.jsonl");

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, sizeof(path) - 1)) <= 0)
		return false;
	path[n] = '\0';
	return (size_t)n > len && strcmp(path + n - len, "/audit.jsonl") == 0 &&
	    strncmp(path, dir, strlen(dir)) == 0;
}

int
fdatasync(int fd)
{
	if (is_audit_log(fd)) {
		pthread_mutex_lock(&sync_mu);
		atomic_fetch_add(&sync_waiting, 1);
		while (sync_held)
			pthread_cond_wait(&sync_cv, &sync_mu);
		atomic_fetch_sub(&sync_waiting, 1);
		pthread_mutex_unlock(&sync_mu);
	}
	return (int)syscall(SYS_fdatasync, fd);
}

static void
hold_syncs(bool on)
{
	pthread_mutex_lock(&sync_mu);
	sync_held = on;
	pthread_cond_broadcast(&sync_cv);
	pthread_mutex_unlock(&sync_mu);
}

/* A record with a detail of n bytes (0: none): the ring is filled with
 * large ones first, then with smaller ones into what is left. */
static int
filler(struct aud_log *log, size_t n)
{
	static char detail[2048];

	memset(detail, 'x', n);
	detail[n] = '\0';
	return aud_append(log, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "t",
	    .detail = n ? detail : NULL });
}

/*
 * The log's writer held in its sync, its ring filled until it refuses
 * even the smallest record while the reserve still has room (aud_room:
 * what the admission asks), so that any record is refused, the start line
 * too.  true when that state was reached.
 */
static bool
fill_ring(struct aud_log *log)
{
	static const size_t sizes[] = { 1900, 200, 0 };

	hold_syncs(true);
	/* One batch for the writer to take, write and sync (held there). */
	if (filler(log, 0) != 0)
		return false;
	for (int i = 0; i < 500 && atomic_load(&sync_waiting) == 0; i++)
		usleep(10000);
	if (atomic_load(&sync_waiting) == 0)
		return false;
	/* Nothing drains now.  A refusal with the reserve short (the
	 * reserver behind the burst) is not the state wanted: aud_room waits
	 * for the reserver, and a record refused after it says yes found the
	 * ring full.  A record refused is refused for want of ring whatever
	 * its size past that (ring_room): the smallest last. */
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int i;

		for (i = 0; i < 100000; i++)
			if (filler(log, sizes[k]) != 0 && aud_room(log) && filler(log, sizes[k]) != 0)
				break;
		if (i == 100000)
			return false;
	}
	return true;
}

/* The bytes read from fd until its end (at most 5 s; -1 if it did not
 * end), fd closed. */
static ssize_t
out_of(int fd)
{
	char buf[256];
	ssize_t n, got = 0;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	if (fd < 0)
		return -1;
	while (poll(&pfd, 1, 5000) == 1 && (n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			got = -1;
			break;
		}
		got += n;
	}
	if (poll(&pfd, 1, 0) != 1)
		got = -1;
	close(fd);
	return got;
}

/* Does the log at path have a line with both strings? */
static bool
log_has(const char *path, const char *a, const char *b)
{
	static char line[1 << 16];
	FILE *f = fopen(path, "r");
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, a) && strstr(line, b);
	if (f)
		fclose(f);
	return found;
}

static void
test_start_line_refused(void)
{
	char *argv[] = { "/bin/echo", "started", NULL };
	struct brk_sbx_spec spec = { .id = "held", .tier = "low", .argv = argv,
		.owner = getuid(), .owner_gid = getgid(), .actor = "broker" };
	struct brk_opts bo = { .state_dir = dir, .quiet = true };
	struct brk *b = NULL;
	struct brk_sbx *s = NULL;
	char why[1024] = "", path[sizeof(dir) + 32];
	pid_t stub = 0;
	int r, out;

	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	r = brk_new_early(&bo, &b, why, sizeof(why));
	if (!T_ERR(r, 0, "the broker's policy") || !b) {
		printf("#   %s\n", why);
		brk_free(b);
		return;
	}
	r = brk_sbx_begin(b, &spec, &s, why, sizeof(why));
	if (!T_ERR(r, 0, "a low-tier sandbox begun") || !s) {
		printf("#   %s\n", why);
		brk_free(b);
		return;
	}
	T_OK(s->spawned, "... its stub spawned, held before its agent");
	stub = s->proc.pid;
	out = dup(s->proc.stdout_fd);	/* what its agent would print */
	if ((r = brk_open(b, why, sizeof(why))) != 0) {
		T_ERR(r, 0, "the broker's state and log");
		printf("#   %s\n", why);
		close(out);
		brk_sbx_discard(s);
		brk_free(b);
		return;
	}
	T_OK(fill_ring(b->aud), "the log's ring is full behind a held sync, its reserve has room");
	T_OK(aud_room(b->aud), "... so the admission's check passes");

	r = brk_sbx_finish(s, why, sizeof(why));
	s = NULL;	/* finish frees it when it fails */
	T_ERR(r, CB_EAUDIT, "the sandbox whose start line the log refuses does not start");
	T_OK(strstr(why, "the audit log refused the sandbox's start line") != NULL,
	    "... saying why (%s)", why);
	T_OK(brk_sbx_find(b, "held") == NULL && b->nsbx == 0, "... and nothing lists it");
	/* Killed unstarted: its output ends with nothing in it (told to go,
	 * it would print "started" and end). */
	T_OK(out_of(out) == 0, "... and its agent never ran (no output)");

	hold_syncs(false);
	brk_free(b);	/* reaps the stub killed unstarted (reap.c) */
	T_OK(stub > 0 && kill(stub, 0) == -1 && errno == ESRCH, "its held stub is gone");
	T_OK(log_has(path, "\"op\":\"broker.stop\"", "\"actor\":\"broker\""),
	    "the log is written once the disk is back");
	T_OK(!log_has(path, "\"op\":\"sandbox.start\"", "\"sandbox\":\"held\""),
	    "... and has no start line of the sandbox");
}

int
main(void)
{
	char stub[PATH_MAX];
	const char *bin = getenv("CB_BIN");

	/* The stub of this build, not an installed one. */
	snprintf(stub, sizeof(stub), "%s/capbroker-stub", bin != NULL ? bin : "bin");
	if (stub[0] != '/') {
		char *abs = realpath(stub, NULL);

		if (abs != NULL && strlen(abs) < sizeof(stub))
			memcpy(stub, abs, strlen(abs) + 1);
		free(abs);
	}
	setenv("CAPBROKER_STUB", stub, 1);
	if (!mkdtemp(dir)) {
		T_OK(false, "mkdtemp: %s", strerror(errno));
		return t_done();
	}
	test_start_line_refused();
	t_rmtmp(dir);
	return t_done();
}
