/*
 * json.c - the command-line tools' one JSON writer (see cli.h).
 *
 * Trust domain: capcall and capctl.  jansson encodes; we only make sure
 * what we hand it is valid UTF-8 (it refuses anything else), ask for ASCII
 * output, so every non-ASCII character, C1 controls and bidirectional
 * overrides included, is written as a \u escape, and escape DEL, which
 * jansson leaves as it is.
 */
#include "cli/cli.h"
#include "common/common.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t
cli_utf8_len(const unsigned char *p, size_t n)
{
	uint32_t cp, min;
	size_t len;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2; cp = p[0] & 0x1fu; min = 0x80;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3; cp = p[0] & 0x0fu; min = 0x800;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4; cp = p[0] & 0x07u; min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3fu);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool
cli_utf8_valid(const void *p, size_t n)
{
	for (size_t i = 0, l; i < n; i += l)
		if ((l = cli_utf8_len((const unsigned char *)p + i, n - i)) == 0)
			return false;
	return true;
}

json_t *
cli_json_strn(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	unsigned char *buf;
	size_t o = 0, l;
	json_t *j;

	if (!s)
		n = 0;
	for (size_t i = 0; i < n; i += l) {
		if ((l = cli_utf8_len(p + i, n - i)) == 0)
			break;
		if (i + l == n)
			return json_stringn((const char *)p, n);	/* all valid */
	}
	if (n == 0)
		return json_string("");
	/* Some bytes are not UTF-8: each becomes U+FFFD (3 bytes). */
	if (n > (SIZE_MAX - 1) / 3 || !(buf = malloc(3 * n + 1)))
		return NULL;
	for (size_t i = 0; i < n; i += l) {
		if ((l = cli_utf8_len(p + i, n - i)) == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			l = 1;
			continue;
		}
		memcpy(buf + o, p + i, l);
		o += l;
	}
	j = json_stringn((const char *)buf, o);
	free(buf);
	return j;
}

json_t *
cli_json_str(const char *s)
{
	return cli_json_strn(s, s ? strlen(s) : 0);
}

int
cli_json_set_str(json_t *o, const char *key, const char *s)
{
	return json_object_set_new(o, key, cli_json_str(s)) == 0 ? 0 : CB_ENOMEM;
}

int
cli_json_print(json_t *v, FILE *f)
{
	char *text;
	int r = 0;

	if (!v)
		return CB_ENOMEM;
	/* JSON_ENCODE_ANY: a bare string or array is a document too. */
	text = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	json_decref(v);
	if (!text)
		return CB_ENOMEM;
	/* jansson leaves DEL (0x7f) as itself; a terminal should not get it.
	 * In ASCII-only JSON a DEL can only stand inside a string, where
	 * \u007f means the same. */
	for (const char *p = text; *p && r == 0; p++) {
		if ((*p == 0x7f ? fputs("\\u007f", f) : fputc(*p, f)) == EOF)
			r = CB_EIO;
	}
	if (r == 0 && fputc('\n', f) == EOF)
		r = CB_EIO;
	free(text);
	return r;
}
