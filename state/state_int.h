/*
 * state_int.h - the in-memory token index shared by the state module's
 * files: 16-byte token ids in a dense array of entries, found through an
 * open-addressing table of 32-bit entry numbers.  Trusted (broker).  Ids
 * looked up may be chosen by an agent (before any signature check), so the
 * hash is keyed with a random seed.
 */
#ifndef CB_STATE_INT_H
#define CB_STATE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caps/caps.h"

#define TM_NONE		UINT32_MAX	/* no parent */

enum {
	TM_REVOKED = 1u << 0,	/* revoked itself (descendants: by walking up) */
	TM_LIMITED = 1u << 1,	/* has a use limit: st_use goes to disk */
	TM_SPENT = 1u << 2,	/* no uses left */
	TM_STUB = 1u << 3,	/* only known as someone's parent (no row yet) */
	TM_FOREIGN = 1u << 4,	/* minted by another broker of the cluster (no row here) */
};

struct tm_ent {
	uint8_t id[CAP_ID_LEN];
	uint32_t parent;	/* entry number of the parent, or TM_NONE */
	uint32_t flags;
};

struct tokmap {
	struct tm_ent *ents;
	uint32_t n, ents_cap;
	uint32_t *slots;	/* entry number + 1; 0 empty */
	uint32_t mask;		/* slots - 1 (a power of two) */
	uint64_t k0, k1;	/* hash key */
};

int tm_init(struct tokmap *m) CB_WARN_UNUSED;
void tm_free(struct tokmap *m);
/* Entry number of id, or TM_NONE. */
uint32_t tm_find(const struct tokmap *m, const uint8_t id[CAP_ID_LEN]);
/* Entry number of id, adding it (as a stub, no parent) if absent. */
int tm_get_or_add(struct tokmap *m, const uint8_t id[CAP_ID_LEN], uint32_t *out) CB_WARN_UNUSED;
/* Revoked itself or through an ancestor?  Fails closed (true) on a chain
 * longer than it can be (a corrupted table). */
bool tm_revoked(const struct tokmap *m, uint32_t e);
/* Depth of entry e (0 for a root). */
unsigned tm_depth(const struct tokmap *m, uint32_t e);
size_t tm_bytes(const struct tokmap *m);
/* How many tokens would revoking e newly revoke (e and every descendant
 * not already revoked)?  A scan of the whole index: O(tokens). */
size_t tm_count_subtree(const struct tokmap *m, uint32_t e);

#endif
