/*
 * dispatch.h - the request dispatcher (dispatch.c), private to broker/.
 */
#ifndef CB_BROKER_DISPATCH_H
#define CB_BROKER_DISPATCH_H

#include <event2/util.h>

/* The read event of a sandbox's channel (arg: struct brk_sbx): read up to
 * BRK_BATCH requests and hand each to its handler. */
void brk_dispatch_readable(evutil_socket_t sock, short ev, void *arg);

#endif
