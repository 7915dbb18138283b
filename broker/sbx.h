/*
 * sbx.h - the sandbox life cycle (sbx.c), private to broker/.  What the
 * rest of the program may do with a sandbox is in broker.h.
 */
#ifndef CB_BROKER_SBX_H
#define CB_BROKER_SBX_H

#include "broker/core.h"

struct brk_sbx *brk_sbx_find(struct brk *b, const char *id);
/* The sentence for "WHAT exceeds the ceiling of tier T", listing what the
 * tier's ceiling does allow (cut with "..." when it does not fit). */
void brk_ceiling_refusal(const struct brk_sbx *s, const char *what, char *why, size_t whylen);

/* The channel is gone (the agent closed it, or it misbehaved): the
 * sandbox is ended.  Set as brk.chan_closed. */
void brk_sbx_close_channel(struct brk_sbx *s, const char *why);
/* Free s at once (the broker is going away: nothing holds it any more). */
void brk_sbx_free(struct brk_sbx *s);

#endif
