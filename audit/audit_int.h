/*
 * audit_int.h - pieces shared by the audit log's writer, verifier and
 * follower: the fixed line prefix and its strict parser.  Trusted code; the
 * parser treats the line as hostile.
 */
#ifndef CB_AUDIT_INT_H
#define CB_AUDIT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"

#define AUD_TS_LEN	24	/* "2026-11-22T13:46:20.123Z" */
#define AUD_SIGMSG_LEN	(AUD_LOG_ID_LEN + 8 + AUD_HASH_LEN)
/* A checkpoint that carries the decision sequence signs it too. */
#define AUD_SIGMSG_DSEQ_LEN (AUD_SIGMSG_LEN + 8)

/* The fixed start of every line, parsed without a JSON parser. */
struct aud_prefix {
	uint8_t prev[AUD_HASH_LEN];
	uint64_t seq;
	const char *ev;		/* points into the line, not terminated */
	size_t ev_len;
	const char *rest;	/* after the closing quote of ev */
	size_t rest_len;
};

/* Parse `{"prev":"<64 hex>","seq":N,"ts":"<24>","ev":"<name>"` at the start
 * of line (len bytes, no '\n').  CB_EAUDIT if it does not match exactly. */
int aud_parse_prefix(const char *line, size_t len, struct aud_prefix *p) CB_WARN_UNUSED;

/* Does p's event name equal name? */
int aud_ev_is(const struct aud_prefix *p, const char *name);

/* The bytes a checkpoint signs: log id || seq (big endian) || prev. */
void aud_sigmsg(const uint8_t log_id[AUD_LOG_ID_LEN], uint64_t seq,
    const uint8_t prev[AUD_HASH_LEN], uint8_t out[AUD_SIGMSG_LEN]);

/* ... followed by the decision sequence (big endian): a checkpoint seals
 * how many decisions the state had committed when it was written. */
void aud_sigmsg_dseq(const uint8_t log_id[AUD_LOG_ID_LEN], uint64_t seq,
    const uint8_t prev[AUD_HASH_LEN], uint64_t dseq, uint8_t out[AUD_SIGMSG_DSEQ_LEN]);

/* Parse the rest of a checkpoint line: ,"log":"..","kid":"..","sig":".."}
 * or, with the decision sequence, ...,"sig":"..","dseq":N} (*has_dseq
 * says which; dseq and has_dseq may be NULL only together). */
int aud_parse_checkpoint(const struct aud_prefix *p, uint8_t log_id[AUD_LOG_ID_LEN],
    uint8_t kid[CAP_KID_LEN], uint8_t sig[64], uint64_t *dseq, bool *has_dseq) CB_WARN_UNUSED;

/* The decision sequence a line carries (its ,"dseq":N field), or false.
 * The field name with its quotes cannot occur inside a string value (a
 * quote there is escaped), so finding it is unambiguous. */
bool aud_line_dseq(const char *line, size_t len, uint64_t *dseq);

/* Parse the rest of a genesis line: ,"log":"..","version":1} */
int aud_parse_genesis(const struct aud_prefix *p, uint8_t log_id[AUD_LOG_ID_LEN]) CB_WARN_UNUSED;

#endif
