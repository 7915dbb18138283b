/*
 * test_audit_room.c - aud_room() during a burst: when the reserve is short
 * only because producers outran its extension (the disk has room), aud_room
 * waits for the top-up instead of refusing an operation; and the wait is
 * bounded by full_wait_ms, so a top-up that does not come cannot hang the
 * broker's loop.  Test code (trusted).
 *
 * The writer is held still through the public API: its checkpoint signer
 * blocks on a gate.  The reserve is extended by a thread of its own, which
 * the same gate holds in fallocate (defined here: the log's object file
 * takes the executable's definition).  Records appended meanwhile use the
 * reserve up until aud_append refuses one.
 */
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

#define WAIT_MS		1500	/* the log's full_wait_ms */
#define WATCHDOG_MS	7000	/* an aud_room() still waiting by then waits without bound */

static char dir[] = "/tmp/test_audit_room.XXXXXX";
static struct cap_keyring *kr;

/* The gate: while armed, the writer's next checkpoint signature waits. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_armed, gate_entered;

static int
gate_sign(void *arg, const uint8_t *msg, size_t len, uint8_t sig[64], uint8_t kid[CAP_KID_LEN])
{
	(void)arg;
	pthread_mutex_lock(&gate_mu);
	if (gate_armed) {
		gate_entered = true;
		pthread_cond_broadcast(&gate_cv);
		while (gate_armed)
			pthread_cond_wait(&gate_cv, &gate_mu);
	}
	pthread_mutex_unlock(&gate_mu);
	return cap_sign(kr, CAP_SIG_DOMAIN_AUDIT, msg, len, sig, kid);
}

/* While the gate is armed, extending the reserve waits too (giving it
 * back at close does not). */
int
fallocate(int fd, int mode, off_t off, off_t len)
{
	if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
		pthread_mutex_lock(&gate_mu);
		while (gate_armed)
			pthread_cond_wait(&gate_cv, &gate_mu);
		pthread_mutex_unlock(&gate_mu);
	}
	return (int)syscall(SYS_fallocate, fd, mode, off, len);
}

static void
gate_set(bool armed)
{
	pthread_mutex_lock(&gate_mu);
	gate_armed = armed;
	gate_entered = false;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

/* Wait (bounded) until the writer sits in the gate. */
static bool
gate_wait_entered(unsigned ms)
{
	struct timespec dl;
	bool in;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate_mu);
	while (!gate_entered && pthread_cond_timedwait(&gate_cv, &gate_mu, &dl) == 0)
		;
	in = gate_entered;
	pthread_mutex_unlock(&gate_mu);
	return in;
}

static void *
do_checkpoint(void *arg)
{
	return (void *)(intptr_t)aud_checkpoint(arg);
}

/* aud_room() in a thread, so that the test sees a wait without bound as
 * a failure instead of hanging with it. */
struct room_call {
	struct aud_log *log;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done, room;
	uint64_t ms;		/* how long it took */
};

static void *
room_thread(void *arg)
{
	struct room_call *c = arg;
	uint64_t t0 = cb_mono_ns();
	bool room = aud_room(c->log);

	pthread_mutex_lock(&c->mu);
	c->room = room;
	c->ms = (cb_mono_ns() - t0) / 1000000u;
	c->done = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void
room_start(struct room_call *c, struct aud_log *log, pthread_t *th)
{
	memset(c, 0, sizeof(*c));
	c->log = log;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	if (pthread_create(th, NULL, room_thread, c) != 0)
		abort();
}

/* Did the call return within ms? */
static bool
room_done_within(struct room_call *c, unsigned ms)
{
	uint64_t end = cb_mono_ns() + (uint64_t)ms * 1000000u;
	bool done;

	for (;;) {
		pthread_mutex_lock(&c->mu);
		done = c->done;
		pthread_mutex_unlock(&c->mu);
		if (done || cb_mono_ns() >= end)
			return done;
		usleep(10000);
	}
}

/* Hold the writer and the reserve's extension in the gate and use up the
 * reserve: afterwards the reserve is short (an append was refused for want
 * of it) while the disk has room.  *cp is the thread whose checkpoint holds
 * the writer. */
static bool
burst(struct aud_log *log, pthread_t *cp, int *accepted)
{
	static char big[AUD_FIELD_MAX + 1];
	struct aud_rec r = { .kind = AUD_OP, .decision = AUD_ALLOW, .sandbox = "sandbox-1",
		.op = "fs.read", .actor = "agent", .detail = big };
	int i;

	memset(big, 'x', AUD_FIELD_MAX);
	/* a checkpoint is written (and signed) only after a record */
	if (aud_append(log, &r) != 0)
		return false;
	gate_set(true);
	if (pthread_create(cp, NULL, do_checkpoint, log) != 0)
		abort();
	if (!gate_wait_entered(5000))
		return false;
	*accepted = 0;
	for (i = 0; i < 10000 && aud_append(log, &r) == 0; i++)
		(*accepted)++;
	return i < 10000;
}

static struct aud_log *
open_log(const char *name)
{
	char p[256];
	struct aud_opts o;
	struct aud_log *log = NULL;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	aud_opts_default(&o);
	o.full_wait_ms = WAIT_MS;
	o.sign = gate_sign;
	if (aud_open(p, kr, &o, &log) != 0)
		return NULL;
	return log;
}

/* The writer and the top-up come back while aud_room waits: the operation
 * is allowed (removing the wait makes this refuse at once). */
static void
test_waits_for_topup(void)
{
	struct aud_log *log = open_log("wait.jsonl");
	struct room_call c;
	pthread_t cp, th;
	void *ret = NULL;
	int accepted = 0;
	bool ok;

	T_OK(log != NULL, "open a log with a gated signer");
	if (!log)
		return;
	T_OK(aud_room(log), "room at rest");
	ok = burst(log, &cp, &accepted);
	T_OK(ok && accepted > 0, "a burst with the writer and the top-up held uses the reserve up "
	    "(%d records accepted, then one refused)", accepted);
	room_start(&c, log, &th);
	usleep(150 * 1000);
	T_OK(!room_done_within(&c, 0), "aud_room waits while the writer and the top-up are held "
	    "(reserve short, disk has room)");
	gate_set(false);
	T_OK(room_done_within(&c, WATCHDOG_MS), "... and returns once they are back");
	pthread_join(th, NULL);
	T_OK(c.room, "... with room: the operation is allowed, not refused (%llu ms)",
	    (unsigned long long)c.ms);
	T_OK(c.ms < WAIT_MS, "... before full_wait_ms ran out");
	pthread_join(cp, &ret);
	T_OK((intptr_t)ret == 0, "the held checkpoint completes");
	T_OK(aud_close(log) == 0, "close");
}

/* The top-up does not come within full_wait_ms: aud_room gives up and
 * refuses (an unbounded wait would hang the loop that asked). */
static void
test_wait_is_bounded(void)
{
	struct aud_log *log = open_log("bound.jsonl");
	struct room_call c;
	pthread_t cp, th;
	void *ret = NULL;
	int accepted = 0;
	bool ok, done;

	T_OK(log != NULL, "open a second log");
	if (!log)
		return;
	ok = burst(log, &cp, &accepted);
	T_OK(ok && accepted > 0, "a burst with the writer and the top-up held uses the reserve up "
	    "(%d records accepted, then one refused)", accepted);
	room_start(&c, log, &th);
	done = room_done_within(&c, WATCHDOG_MS);
	T_OK(done, "with the writer and the top-up held, aud_room returns without them (bounded "
	    "wait)");
	/* release the writer before joining: an unbounded wait ends now too */
	gate_set(false);
	pthread_join(th, NULL);
	if (done) {
		T_OK(!c.room, "... refusing: no room yet");
		T_OK(c.ms >= WAIT_MS * 9 / 10 && c.ms < WATCHDOG_MS,
		    "... after about full_wait_ms (%llu ms, full_wait_ms %d)", (unsigned long long)c.ms,
		    WAIT_MS);
	} else {
		T_OK(false, "... refusing: no room yet");
		T_OK(false, "... after about full_wait_ms (still waiting after %d ms)", WATCHDOG_MS);
	}
	pthread_join(cp, &ret);
	T_OK((intptr_t)ret == 0, "the held checkpoint completes");
	T_OK(aud_room(log), "room again once the writer and the top-up are back");
	T_OK(aud_close(log) == 0, "close");
}

int
main(void)
{
	struct cap_key *k = NULL;

	if (mkdtemp(dir) == NULL || cap_keyring_new(&kr) != 0 || cap_key_generate(&k) != 0 ||
	    cap_keyring_add(kr, k, true) != 0)
		return 1;
	test_waits_for_topup();
	test_wait_is_bounded();
	cap_keyring_free(kr);
	t_rmtmp(dir);
	return t_done();
}
