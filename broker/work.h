/*
 * work.h - worker threads (work.c), private to broker/.
 */
#ifndef CB_BROKER_WORK_H
#define CB_BROKER_WORK_H

#include "broker/core.h"

/* Run fn(arg) on a worker thread, then done(arg) on the loop.  CB_ENOMEM,
 * CB_EBUSY (no thread). */
int brk_work(struct brk *b, void (*fn)(void *), void (*done)(void *), void *arg) CB_WARN_UNUSED;


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
