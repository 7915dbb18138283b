/*
 * pos_socketpair.c - escape attempt: positive: the socketpair reaches the broker (ping).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 *
 * Sends the msgpack request {"id": 1, "op": "ping"} (docs/protocol.md) on
 * CAPBROKER_FD and checks that the reply is exactly {"id": 1, "ok": true}.
 * The attempts link nothing but libc, so the few msgpack bytes are written
 * and read by hand: a map header (fixmap, map16 or map32), fixstr keys, a
 * positive integer and a bool.
 */
#include <sys/socket.h>

#include "tests/escape/escape.h"

struct mp {
	const unsigned char *p, *end;
};

static bool
mp_take(struct mp *m, size_t n, const unsigned char **out)
{
	if ((size_t)(m->end - m->p) < n)
		return false;
	*out = m->p;
	m->p += n;
	return true;
}

static bool
mp_uint(struct mp *m, unsigned long *v, size_t n)
{
	const unsigned char *b;

	if (!mp_take(m, n, &b))
		return false;
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v = *v << 8 | b[i];
	return true;
}

/* A map header: its number of entries. */
static bool
mp_map(struct mp *m, unsigned long *count)
{
	const unsigned char *b;

	if (!mp_take(m, 1, &b))
		return false;
	if ((*b & 0xf0) == 0x80) {
		*count = *b & 0x0f;
		return true;
	}
	if (*b == 0xde)
		return mp_uint(m, count, 2);
	if (*b == 0xdf)
		return mp_uint(m, count, 4);
	return false;
}

/* A fixstr key, compared with want. */
static bool
mp_key(struct mp *m, const char *want)
{
	const unsigned char *b, *s;
	size_t len;

	if (!mp_take(m, 1, &b) || (*b & 0xe0) != 0xa0)
		return false;
	len = *b & 0x1f;
	return mp_take(m, len, &s) && len == strlen(want) && memcmp(s, want, len) == 0;
}

/* A non-negative integer (positive fixint, uint8/16/32). */
static bool
mp_int(struct mp *m, unsigned long *v)
{
	const unsigned char *b;

	if (!mp_take(m, 1, &b))
		return false;
	if (*b < 0x80) {
		*v = *b;
		return true;
	}
	if (*b >= 0xcc && *b <= 0xce)
		return mp_uint(m, v, (size_t)1 << (*b - 0xcc));
	return false;
}

int
main(void)
{
	/* {"id": 1, "op": "ping"}: fixmap(2), "id", 1, "op", "ping" */
	static const unsigned char ping[] = { 0x82, 0xa2, 'i', 'd', 0x01,
	    0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g' };
	const char *fds = getenv("CAPBROKER_FD");
	unsigned char buf[4096];
	const unsigned char *b;
	unsigned long count = 0, id = 0;
	int fd = fds != NULL ? atoi(fds) : -1;
	bool got_id = false, got_ok = false;
	struct mp m;
	ssize_t n;

	esc_true(send(fd, ping, sizeof(ping), 0) == (ssize_t)sizeof(ping),
	    "send on CAPBROKER_FD");
	n = recv(fd, buf, sizeof(buf), 0);
	esc_true(n > 0, "no reply from the broker");
	if (n <= 0)
		return esc_done("unreachable");
	m = (struct mp){ buf, buf + n };
	esc_true(mp_map(&m, &count) && count == 2, "the reply is not a map of two entries");
	for (unsigned long i = 0; i < count && esc_bad == 0; i++) {
		if (mp_key(&(struct mp){ m.p, m.end }, "id")) {
			mp_key(&m, "id");
			esc_true(mp_int(&m, &id) && id == 1 && !got_id, "the reply's id is not 1");
			got_id = true;
		} else if (mp_key(&m, "ok")) {
			esc_true(mp_take(&m, 1, &b) && *b == 0xc3 && !got_ok, "the reply's ok is not true");
			got_ok = true;
		} else {
			esc_escaped("the reply has a key other than id and ok");
		}
	}
	esc_true(got_id && got_ok, "the reply lacks id or ok");
	esc_true(m.p == m.end, "trailing bytes after the reply");
	return esc_done("pinged the broker on fd %d: {\"id\": 1, \"ok\": true}", fd);
}
