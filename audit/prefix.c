/*
 * prefix.c - strict parser of the fixed start of an audit line and of the
 * two fixed-layout lines (genesis, checkpoint).  Trusted code reading a
 * file an attacker may have edited: every byte is checked, nothing is
 * skipped, lengths are exact.  This is not a JSON parser: it accepts only
 * the exact bytes the writer produces.
 */
#include "audit/audit_int.h"

#include <string.h>

/* Match literal s at *pos; advance. */
static int
lit(const char *line, size_t len, size_t *pos, const char *s)
{
	size_t n = strlen(s);

	if (len - *pos < n || memcmp(line + *pos, s, n) != 0)
		return CB_EAUDIT;
	*pos += n;
	return 0;
}

/* Exactly 2n lowercase hex digits at *pos into b; advance. */
static int
hexfield(const char *line, size_t len, size_t *pos, uint8_t *b, size_t n)
{
	size_t i;

	if (len - *pos < 2 * n)
		return CB_EAUDIT;
	/* lowercase only: one spelling per value (the line bytes are hashed) */
	for (i = 0; i < 2 * n; i++) {
		char c = line[*pos + i];
		unsigned v;

		if (c >= '0' && c <= '9')
			v = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = (unsigned)(c - 'a' + 10);
		else
			return CB_EAUDIT;
		if (i % 2 == 0)
			b[i / 2] = (uint8_t)(v << 4);
		else
			b[i / 2] |= (uint8_t)v;
	}
	*pos += 2 * n;
	return 0;
}

int
aud_parse_prefix(const char *line, size_t len, struct aud_prefix *p)
{
	size_t pos = 0, start, i;
	uint64_t v = 0;

	memset(p, 0, sizeof(*p));
	if (lit(line, len, &pos, "{\"prev\":\"") != 0 ||
	    hexfield(line, len, &pos, p->prev, AUD_HASH_LEN) != 0 ||
	    lit(line, len, &pos, "\",\"seq\":") != 0)
		return CB_EAUDIT;
	start = pos;
	while (pos < len && line[pos] >= '0' && line[pos] <= '9') {
		if (pos - start >= 19)	/* fits in uint64_t without overflow */
			return CB_EAUDIT;
		v = v * 10 + (uint64_t)(line[pos] - '0');
		pos++;
	}
	/* no empty number, no leading zero: one spelling per seq */
	if (pos == start || (line[start] == '0' && pos - start > 1))
		return CB_EAUDIT;
	p->seq = v;
	if (lit(line, len, &pos, ",\"ts\":\"") != 0 || len - pos < AUD_TS_LEN)
		return CB_EAUDIT;
	for (i = 0; i < AUD_TS_LEN; i++) {
		char c = line[pos + i];

		if (c == '"' || c == '\\' || (unsigned char)c < 0x20)
			return CB_EAUDIT;
	}
	pos += AUD_TS_LEN;
	if (lit(line, len, &pos, "\",\"ev\":\"") != 0)
		return CB_EAUDIT;
	start = pos;
	while (pos < len && line[pos] >= 'a' && line[pos] <= 'z')
		pos++;
	if (pos == start || pos >= len || line[pos] != '"')
		return CB_EAUDIT;
	p->ev = line + start;
	p->ev_len = pos - start;
	pos++;
	p->rest = line + pos;
	p->rest_len = len - pos;
	/* every line is one object: it must end with '}' */
	if (line[len - 1] != '}')
		return CB_EAUDIT;
	return 0;
}

int
aud_ev_is(const struct aud_prefix *p, const char *name)
{
	return p->ev_len == strlen(name) && memcmp(p->ev, name, p->ev_len) == 0;
}

void
aud_sigmsg(const uint8_t log_id[AUD_LOG_ID_LEN], uint64_t seq, const uint8_t prev[AUD_HASH_LEN],
    uint8_t out[AUD_SIGMSG_LEN])
{
	int i;

	memcpy(out, log_id, AUD_LOG_ID_LEN);
	for (i = 0; i < 8; i++)
		out[AUD_LOG_ID_LEN + i] = (uint8_t)(seq >> (56 - 8 * i));
	memcpy(out + AUD_LOG_ID_LEN + 8, prev, AUD_HASH_LEN);
}

void
aud_sigmsg_dseq(const uint8_t log_id[AUD_LOG_ID_LEN], uint64_t seq,
    const uint8_t prev[AUD_HASH_LEN], uint64_t dseq, uint8_t out[AUD_SIGMSG_DSEQ_LEN])
{
	int i;

	aud_sigmsg(log_id, seq, prev, out);
	for (i = 0; i < 8; i++)
		out[AUD_SIGMSG_LEN + i] = (uint8_t)(dseq >> (56 - 8 * i));
}

/* A decimal uint64 in its one spelling (no leading zero); *pos moves. */
static int
decfield(const char *s, size_t len, size_t *pos, uint64_t *v)
{
	size_t start = *pos;

	*v = 0;
	while (*pos < len && s[*pos] >= '0' && s[*pos] <= '9') {
		if (*pos - start >= 19)
			return CB_EAUDIT;
		*v = *v * 10 + (uint64_t)(s[*pos] - '0');
		(*pos)++;
	}
	if (*pos == start || (s[start] == '0' && *pos - start > 1))
		return CB_EAUDIT;
	return 0;
}

int
aud_parse_checkpoint(const struct aud_prefix *p, uint8_t log_id[AUD_LOG_ID_LEN],
    uint8_t kid[CAP_KID_LEN], uint8_t sig[64], uint64_t *dseq, bool *has_dseq)
{
	size_t pos = 0, len = p->rest_len;
	const char *s = p->rest;
	uint64_t d = 0;
	bool has = false;

	if (lit(s, len, &pos, ",\"log\":\"") != 0 ||
	    hexfield(s, len, &pos, log_id, AUD_LOG_ID_LEN) != 0 ||
	    lit(s, len, &pos, "\",\"kid\":\"") != 0 ||
	    hexfield(s, len, &pos, kid, CAP_KID_LEN) != 0 ||
	    lit(s, len, &pos, "\",\"sig\":\"") != 0 ||
	    hexfield(s, len, &pos, sig, 64) != 0 ||
	    lit(s, len, &pos, "\"") != 0)
		return CB_EAUDIT;
	if (lit(s, len, &pos, ",\"dseq\":") == 0) {
		if (decfield(s, len, &pos, &d) != 0)
			return CB_EAUDIT;
		has = true;
	}
	if (lit(s, len, &pos, "}") != 0 || pos != len)
		return CB_EAUDIT;
	if (dseq != NULL)
		*dseq = d;
	if (has_dseq != NULL)
		*has_dseq = has;
	return 0;
}

bool
aud_line_dseq(const char *line, size_t len, uint64_t *dseq)
{
	static const char key[] = ",\"dseq\":";
	const char *k = memmem(line, len, key, sizeof(key) - 1);
	size_t pos;

	if (k == NULL)
		return false;
	pos = (size_t)(k - line) + sizeof(key) - 1;
	return decfield(line, len, &pos, dseq) == 0;
}

int
aud_parse_genesis(const struct aud_prefix *p, uint8_t log_id[AUD_LOG_ID_LEN])
{
	size_t pos = 0, len = p->rest_len;
	const char *s = p->rest;

	if (lit(s, len, &pos, ",\"log\":\"") != 0 ||
	    hexfield(s, len, &pos, log_id, AUD_LOG_ID_LEN) != 0 ||
	    lit(s, len, &pos, "\",\"version\":1}") != 0 || pos != len)
		return CB_EAUDIT;
	return 0;
}
