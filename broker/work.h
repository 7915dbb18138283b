/*
 * work.h - worker threads (work.c), private to broker/.
 */
#ifndef CB_BROKER_WORK_H
#define CB_BROKER_WORK_H

#include "broker/core.h"

#include <stdbool.h>
#include <time.h>

/* Run fn(arg) on a worker thread, then done(arg) on the loop.  CB_ENOMEM,
 * CB_EBUSY (no thread). */
int brk_work(struct brk *b, void (*fn)(void *), void (*done)(void *), void *arg) CB_WARN_UNUSED;

/*
 * A worker's blocking call, cut short: between brk_work_cut_start and
 * brk_work_cut_stop the worker that called them gets a signal every ns
 * nanoseconds (a timer aimed at that thread alone; the handler does
 * nothing), so that an interruptible wait in the kernel ends (EINTR, or
 * given up, as a socket's linger is) instead of lasting as long as an
 * agent chose.  Repeated, not once: a signal that lands just before the
 * call is handled and gone.  Workers block every signal otherwise, so
 * nothing else of theirs is interrupted.  start is false when no timer
 * could be made (out of memory, RLIMIT_SIGPENDING): then nothing is cut.
 */
struct brk_cut {
	timer_t tm;
	bool on;
};
bool brk_work_cut_start(struct brk_cut *k, long ns);
void brk_work_cut_stop(struct brk_cut *k);

/* Open the wake pipe and its event on b->base: CB_EIO, CB_ENOMEM. */
int brk_work_open(struct brk *b) CB_WARN_UNUSED;
/* Run the completions of jobs that end within ms (or are already done)
 * on this thread, the loop being no longer run: at shutdown, once the
 * sandboxes' processes are gone, so that a job that was waiting on them
 * (an AF_UNIX connect to a listener of theirs) is freed with what it
 * holds instead of being lost when the pipe closes.  Jobs still running
 * after ms are left to brk_work_close. */
void brk_work_drain(struct brk *b, int ms);
/* Close them (a worker still running then finds the pipe closed and its
 * completion is dropped: the broker is going away). */
void brk_work_close(struct brk *b);

#endif
