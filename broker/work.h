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
/* Close them (a worker still running then finds the pipe closed and its
 * completion is dropped: the broker is going away). */
void brk_work_close(struct brk *b);

#endif
