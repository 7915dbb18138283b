/*
 * test_audit_slow.c - the audit log on a disk whose fdatasync is slow (a
 * busy disk: seconds are common): a burst of operations from many threads
 * while the writer waits in fdatasync is not refused when the disk has
 * room, because the reserve is extended by a thread of its own and not by
 * the writer between its syncs.  And a file system without fallocate still
 * logs.  Test code (trusted).
 *
 * fdatasync and fallocate are defined here: the log's object file takes
 * the executable's definitions, so every sync of the log first sleeps
 * sync_ms and fallocate can be made to fail as on a file system without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "caps/caps.h"
#include "common/common.h"
#include "tests/tap.h"

#define SYNC_MS		1500	/* one fdatasync of the log while armed */
#define THREADS		8	/* sandboxes, or the served file system's threads */
#define OPS		250	/* operations each, ... */
#define PACE_US		2000	/* ... one every 2 ms: 4,000 a second in all */

static char dir[] = "/tmp/test_audit_slow.XXXXXX";
static struct cap_keyring *kr;
static atomic_int sync_ms;
static atomic_int syncs;
static atomic_bool no_fallocate;

int
fdatasync(int fd)
{
	int ms = atomic_load(&sync_ms);

	if (ms > 0) {
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

		atomic_fetch_add(&syncs, 1);
		nanosleep(&ts, NULL);
	}
	return (int)syscall(SYS_fdatasync, fd);
}

int
fallocate(int fd, int mode, off_t off, off_t len)
{
	if (atomic_load(&no_fallocate)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return (int)syscall(SYS_fallocate, fd, mode, off, len);
}

static char *
path_of(const char *name)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

struct prod {
	struct aud_log *log;
	int id;
	int room_refused;	/* aud_room() said no: the operation would be denied */
	int append_refused;	/* aud_append() said no after aud_room() said yes */
	int accepted;
	uint64_t max_wait_ns;	/* the longest aud_room() + aud_append() */
};

/* An operation as the broker's loop does it: room first (aud_room, which
 * waits at most full_wait_ms), then its line. */
static void *
producer(void *arg)
{
	static const uint8_t tid[CAP_ID_LEN] = { 7, 7, 7 };
	struct prod *p = arg;
	char sbx[32], res[96];
	int i;

	snprintf(sbx, sizeof(sbx), "sandbox-%d", p->id);
	for (i = 0; i < OPS; i++) {
		struct aud_rec r = { .kind = AUD_OP, .decision = AUD_ALLOW, .sandbox = sbx,
			.op = "fs.open", .resource = res, .token_id = tid, .actor = "agent",
			.detail = "served, read" };
		uint64_t t0 = cb_mono_ns(), dt;

		snprintf(res, sizeof(res), "/home/user/workspace/project/src/module-%d/file-%d.c",
		    p->id, i);
		if (!aud_room(p->log))
			p->room_refused++;
		else if (aud_append(p->log, &r) != 0)
			p->append_refused++;
		else
			p->accepted++;
		dt = cb_mono_ns() - t0;
		if (dt > p->max_wait_ns)
			p->max_wait_ns = dt;
		usleep(PACE_US);
	}
	return NULL;
}

/* Run the producers; the totals in *sum. */
static void
burst(struct aud_log *log, struct prod *sum)
{
	struct prod pr[THREADS];
	pthread_t th[THREADS];
	int i;

	memset(sum, 0, sizeof(*sum));
	for (i = 0; i < THREADS; i++) {
		pr[i] = (struct prod){ .log = log, .id = i };
		if (pthread_create(&th[i], NULL, producer, &pr[i]) != 0)
			abort();
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		sum->room_refused += pr[i].room_refused;
		sum->append_refused += pr[i].append_refused;
		sum->accepted += pr[i].accepted;
		if (pr[i].max_wait_ns > sum->max_wait_ns)
			sum->max_wait_ns = pr[i].max_wait_ns;
	}
}

/* 2,000 operations from 8 threads in about half a second while every
 * fdatasync of the log takes 1.5 s, with the default options (256 KiB
 * reserve, full_wait_ms 200).  Before the reserve had a thread of its
 * own, the writer extended it only between its syncs: the burst used it
 * up within the first sync and operations were refused for want of room
 * on a disk that had plenty. */
static void
test_slow_sync(void)
{
	const char *p = path_of("slow.jsonl");
	struct aud_log *log = NULL;
	struct aud_report rep;
	struct aud_stats st;
	struct prod sum;
	uint64_t t0;

	T_ERR(aud_open(p, kr, NULL, &log), 0, "open with the default options");
	if (!log)
		return;
	atomic_store(&syncs, 0);
	atomic_store(&sync_ms, SYNC_MS);
	t0 = cb_mono_ns();
	burst(log, &sum);
	printf("# %d x %d operations with %d ms syncs: %d accepted, %d refused by aud_room, "
	    "%d by aud_append; %d slow syncs; %llu ms in all, the longest operation %llu ms\n",
	    THREADS, OPS, SYNC_MS, sum.accepted, sum.room_refused, sum.append_refused,
	    atomic_load(&syncs), (unsigned long long)((cb_mono_ns() - t0) / 1000000u),
	    (unsigned long long)(sum.max_wait_ns / 1000000u));
	T_OK(atomic_load(&syncs) > 0, "the writer met a slow fdatasync during the burst");
	T_OK(sum.room_refused == 0, "no operation refused by aud_room on a disk with room (%d of "
	    "%d)", sum.room_refused, THREADS * OPS);
	T_OK(sum.append_refused == 0, "no line refused by aud_append (%d)", sum.append_refused);
	T_OK(sum.max_wait_ns < 200000000ull, "no operation waited full_wait_ms for room (the "
	    "longest %llu ms)", (unsigned long long)(sum.max_wait_ns / 1000000u));
	atomic_store(&sync_ms, 0);
	T_ERR(aud_flush(log), 0, "flush");
	aud_stats(log, &st);
	T_OK(st.written == st.appended && st.written >= (uint64_t)sum.accepted,
	    "every accepted line written (%llu of %llu)", (unsigned long long)st.written,
	    (unsigned long long)st.appended);
	T_ERR(aud_close(log), 0, "close (the reserving thread ends)");
	T_ERR(aud_verify(p, kr, NULL, &rep), 0, "verifies: %s", rep.what);
}

/* A file system without fallocate (EOPNOTSUPP): no reserve, the log
 * works as before it had one (it fails closed on ENOSPC instead). */
static void
test_no_fallocate(void)
{
	const char *p = path_of("nofalloc.jsonl");
	struct aud_log *log = NULL;
	struct aud_report rep;
	struct aud_stats st;
	struct prod sum;

	atomic_store(&no_fallocate, true);
	T_ERR(aud_open(p, kr, NULL, &log), 0, "open where fallocate is not supported");
	if (!log) {
		atomic_store(&no_fallocate, false);
		return;
	}
	T_OK(aud_room(log), "... room (no reserve to run out)");
	burst(log, &sum);
	T_OK(sum.room_refused == 0 && sum.append_refused == 0 && sum.accepted == THREADS * OPS,
	    "... %d operations from %d threads, none refused (%d, %d)", THREADS * OPS, THREADS,
	    sum.room_refused, sum.append_refused);
	T_ERR(aud_flush(log), 0, "... flush");
	aud_stats(log, &st);
	T_OK(st.written == st.appended, "... every line written (%llu)",
	    (unsigned long long)st.written);
	T_ERR(aud_close(log), 0, "... close");
	atomic_store(&no_fallocate, false);
	T_ERR(aud_verify(p, kr, NULL, &rep), 0, "... verifies: %s", rep.what);
}

int
main(void)
{
	struct cap_key *k = NULL;

	if (mkdtemp(dir) == NULL || cap_keyring_new(&kr) != 0 || cap_key_generate(&k) != 0 ||
	    cap_keyring_add(kr, k, true) != 0)
		return 1;
	test_slow_sync();
	test_no_fallocate();
	cap_keyring_free(kr);
	t_rmtmp(dir);
	return t_done();
}
