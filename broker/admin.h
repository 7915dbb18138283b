/*
 * admin.h - the admin socket (admin.c); private to broker/.
 */
#ifndef CB_BROKER_ADMIN_H
#define CB_BROKER_ADMIN_H

#include "broker/core.h"

int brk_admin_listen(struct brk *b, const char *path, char *why, size_t whylen) CB_WARN_UNUSED;
/* Serve an inherited listening socket (socket activation) instead. */
int brk_admin_adopt(struct brk *b, int fd, char *why, size_t whylen) CB_WARN_UNUSED;
void brk_admin_close(struct brk *b);
/* Tell the connections that watch that request rid arrived (a request event). */
void brk_admin_notify(struct brk *b, uint64_t rid);
/* The same for a request another broker of the cluster holds. */
void brk_admin_notify_cl(struct brk *b, const struct cl_req *r);

#endif
