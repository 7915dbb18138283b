/*
 * tokmap.c - the in-memory token index behind the hot-path revocation and
 * use checks (see state_int.h).  Trusted (broker).  Entries never move
 * between entry numbers, so a child can point at its parent by number
 * (4 bytes instead of 16) and the slot table can be rebuilt freely.
 */
#include "state/state_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <sodium.h>

#define TM_MAX_WALK 64		/* > ST_MAX_DEPTH; a longer walk means corruption */
#define TM_HUGE (2u << 20)

/* Tables come from mmap so that big ones can ask for transparent huge
 * pages: a lookup in a table of a million tokens touches two or three
 * random cache lines, and with 4 KiB pages each also misses the TLB. */
static void *
tm_map(size_t size)
{
	void *p;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (size >= TM_HUGE)
		(void)madvise(p, size, MADV_HUGEPAGE);
	return p;
}

static void
tm_unmap(void *p, size_t size)
{
	if (p != NULL)
		munmap(p, size);
}

static size_t
slots_size(uint32_t mask)
{
	return ((size_t)mask + 1) * sizeof(uint32_t);
}

static uint64_t
tm_hash(const struct tokmap *m, const uint8_t id[CAP_ID_LEN])
{
	uint64_t a, b, h;

	/* Token ids are random, but a hostile agent picks the ids it
	 * presents; keyed mixing keeps it from aiming at one probe chain. */
	memcpy(&a, id, 8);
	memcpy(&b, id + 8, 8);
	h = (a ^ m->k0) * 0x9e3779b97f4a7c15ull;
	h ^= (b ^ m->k1) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 31;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 29;
	return h;
}

int
tm_init(struct tokmap *m)
{
	memset(m, 0, sizeof(*m));
	if (sodium_init() < 0)
		return CB_EINTERNAL;
	randombytes_buf(&m->k0, sizeof(m->k0));
	randombytes_buf(&m->k1, sizeof(m->k1));
	m->mask = 1023;
	if ((m->slots = tm_map(slots_size(m->mask))) == NULL)
		return CB_ENOMEM;
	return 0;
}

void
tm_free(struct tokmap *m)
{
	tm_unmap(m->ents, (size_t)m->ents_cap * sizeof(*m->ents));
	tm_unmap(m->slots, m->slots != NULL ? slots_size(m->mask) : 0);
	memset(m, 0, sizeof(*m));
}

uint32_t
tm_find(const struct tokmap *m, const uint8_t id[CAP_ID_LEN])
{
	uint64_t i = tm_hash(m, id);

	for (;; i++) {
		uint32_t s = m->slots[i & m->mask];

		if (s == 0)
			return TM_NONE;
		if (memcmp(m->ents[s - 1].id, id, CAP_ID_LEN) == 0)
			return s - 1;
	}
}

static void
tm_place(struct tokmap *m, uint32_t e)
{
	uint64_t i = tm_hash(m, m->ents[e].id);

	while (m->slots[i & m->mask] != 0)
		i++;
	m->slots[i & m->mask] = e + 1;
}

/* Keep the slot table at most half full: short probes for absent ids. */
static int
tm_grow(struct tokmap *m)
{
	uint32_t newcap, e;

	if (m->n == m->ents_cap) {
		struct tm_ent *ne;

		if (m->ents_cap >= UINT32_MAX / 2)
			return CB_ETOOBIG;
		newcap = m->ents_cap ? m->ents_cap * 2 : 1024;
		if ((ne = tm_map((size_t)newcap * sizeof(*ne))) == NULL)
			return CB_ENOMEM;
		if (m->n > 0)
			memcpy(ne, m->ents, (size_t)m->n * sizeof(*ne));
		tm_unmap(m->ents, (size_t)m->ents_cap * sizeof(*ne));
		m->ents = ne;
		m->ents_cap = newcap;
	}
	if ((uint64_t)(m->n + 1) * 2 > (uint64_t)m->mask + 1) {
		uint32_t *ns, nm = m->mask * 2 + 1;

		if ((ns = tm_map(slots_size(nm))) == NULL)
			return CB_ENOMEM;
		tm_unmap(m->slots, slots_size(m->mask));
		m->slots = ns;
		m->mask = nm;
		for (e = 0; e < m->n; e++)
			tm_place(m, e);
	}
	return 0;
}

int
tm_get_or_add(struct tokmap *m, const uint8_t id[CAP_ID_LEN], uint32_t *out)
{
	uint32_t e = tm_find(m, id);
	int rc;

	if (e != TM_NONE) {
		*out = e;
		return 0;
	}
	if ((rc = tm_grow(m)) != 0)
		return rc;
	e = m->n++;
	memcpy(m->ents[e].id, id, CAP_ID_LEN);
	m->ents[e].parent = TM_NONE;
	m->ents[e].flags = TM_STUB;
	tm_place(m, e);
	*out = e;
	return 0;
}

bool
tm_revoked(const struct tokmap *m, uint32_t e)
{
	int steps;

	for (steps = 0; steps < TM_MAX_WALK; steps++) {
		if (m->ents[e].flags & TM_REVOKED)
			return true;
		if ((e = m->ents[e].parent) == TM_NONE)
			return false;
	}
	return true;
}

unsigned
tm_depth(const struct tokmap *m, uint32_t e)
{
	unsigned d = 0;

	while (d < TM_MAX_WALK && (e = m->ents[e].parent) != TM_NONE)
		d++;
	return d;
}

size_t
tm_bytes(const struct tokmap *m)
{
	return (size_t)m->ents_cap * sizeof(struct tm_ent) + ((size_t)m->mask + 1) * sizeof(uint32_t);
}

size_t
tm_count_subtree(const struct tokmap *m, uint32_t root)
{
	size_t n = 0;
	uint32_t i, j;
	int steps;

	if (tm_revoked(m, root))
		return 0;
	/* only parent links are kept (4 bytes an entry), so descendants are
	 * found by walking up from every entry */
	for (i = 0; i < m->n; i++) {
		if (m->ents[i].flags & TM_STUB)
			continue;
		for (j = i, steps = 0; j != TM_NONE && steps < TM_MAX_WALK; steps++) {
			if (j == root) {
				n++;
				break;
			}
			if (m->ents[j].flags & TM_REVOKED)
				break;
			j = m->ents[j].parent;
		}
	}
	return n;
}
