/*
 * text.c - the one escaper for text an agent wrote that a person reads.
 *
 * Trust domain: every process that shows agent text to a human (the
 * broker's tty prompt, capctl's tables, pending and watch, check-policy's
 * messages).  The input is hostile: a request's reason, a sandbox's
 * command line, a token's audience, a path.  An agent that can put a
 * cursor movement, a carriage return, a bidirectional override or an
 * invisible character in front of an approver can make the request read as
 * something it is not ("approve fs.read:/etc/passwd" rendered as
 * "approve fs.read:/tmp/x"), so everything that is not plainly visible is
 * shown as a visible escape instead.  So are the characters that draw
 * where they should not: combining marks (stacked or overlaid on the
 * character before them, or on the line above and below), spaces other
 * than U+0020 and the braille blank (which look like one but are not, and
 * break lines where the approver does not expect), and runs of spaces
 * (which, in a long reason, wrap the text into a block that looks like a
 * line of the prompt's own).  The escape form is unambiguous (a backslash
 * is doubled), so what the human reads determines the bytes.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cb_range {
	uint32_t lo, hi;
};

#include "common/text_marks.inc"

/* A run of more spaces than this is shown as "\x20{N}". */
#define CB_SPACE_RUN	3

/* Length of the valid, shortest-form UTF-8 sequence at s (1..4) with its
 * code point in *cp, or 0 if the bytes there are not valid UTF-8. */
static size_t
cb_utf8_dec(const unsigned char *s, uint32_t *cp)
{
	uint32_t c = s[0], min;
	size_t n;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2; c &= 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3; c &= 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4; c &= 0x07; min = 0x10000;
	} else {
		return 0;
	}
	/* A NUL ends the string before a continuation byte could: s[i] is
	 * never read past the terminator. */
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3fu);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/*
 * Code points that change or hide what a person reads.  Controls (Cc), the
 * format characters (Cf: bidi marks, embeddings, overrides and isolates,
 * zero-width spaces and joiners, the byte order mark, interlinear
 * annotations, the tag characters used to smuggle text past a reader),
 * the line and paragraph separators, the fillers that render as nothing,
 * and the variation selectors (invisible, and used to hide data too).
 */
bool
cb_text_invisible(uint32_t cp)
{
	static const struct cb_range r[] = {
		{ 0x0000, 0x001f }, { 0x007f, 0x009f },	/* C0, DEL, C1 */
		{ 0x00ad, 0x00ad },			/* soft hyphen */
		{ 0x034f, 0x034f },			/* combining grapheme joiner */
		{ 0x0600, 0x0605 }, { 0x061c, 0x061c },	/* Arabic format, letter mark */
		{ 0x06dd, 0x06dd }, { 0x070f, 0x070f },
		{ 0x0890, 0x0891 }, { 0x08e2, 0x08e2 },
		{ 0x115f, 0x1160 },			/* Hangul fillers */
		{ 0x17b4, 0x17b5 },			/* Khmer inherent vowels */
		{ 0x180b, 0x180f },			/* Mongolian selectors, separator */
		{ 0x200b, 0x200f },			/* zero width, LRM, RLM */
		{ 0x2028, 0x202e },			/* LS, PS, LRE..RLO */
		{ 0x2060, 0x206f },			/* word joiner, isolates, ... */
		{ 0x3164, 0x3164 },			/* Hangul filler */
		{ 0xfe00, 0xfe0f },			/* variation selectors */
		{ 0xfeff, 0xfeff },			/* byte order mark / ZWNBSP */
		{ 0xffa0, 0xffa0 },			/* halfwidth Hangul filler */
		{ 0xfff9, 0xfffb },			/* interlinear annotation */
		{ 0x110bd, 0x110bd }, { 0x110cd, 0x110cd },
		{ 0x13430, 0x1343f },			/* Egyptian format controls */
		{ 0x1bca0, 0x1bca3 },			/* shorthand format controls */
		{ 0x1d173, 0x1d17a },			/* musical format controls */
		{ 0xe0000, 0xe0fff },			/* tags, variation selectors */
	};

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if (cp >= r[i].lo && cp <= r[i].hi)
			return true;
	return false;
}

/* Is cp a combining mark (Mn, Me): drawn over, under or through the
 * character before it? */
static bool
cb_text_mark(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(cb_text_marks) / sizeof(cb_text_marks[0]);

	if (cp < cb_text_marks[0].lo)
		return false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cp < cb_text_marks[mid].lo)
			hi = mid;
		else if (cp > cb_text_marks[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

/* A space that is not U+0020 (Unicode's Zs: no-break, ogham, the en, em
 * and other typographic spaces, narrow no-break, mathematical, ideographic)
 * or the braille blank, which renders as one. */
static bool
cb_text_odd_space(uint32_t cp)
{
	return cp == 0x00a0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x202f ||
	    cp == 0x205f || cp == 0x3000 || cp == 0x2800;
}

bool
cb_text_escaped(uint32_t cp)
{
	return cb_text_invisible(cp) || cb_text_mark(cp) || cb_text_odd_space(cp);
}

/* The display form of the character at s: *in bytes of input become the
 * returned string (in esc, or s itself when it needs nothing).  A run of
 * more than CB_SPACE_RUN spaces is one unit, "\x20{N}". */
static size_t
cb_esc_one(const unsigned char *s, char esc[CB_ESC_UNIT + 1], const char **out, size_t *in)
{
	uint32_t cp = 0;
	size_t n = cb_utf8_dec(s, &cp), run = 0;

	*out = esc;
	if (n == 0) {
		*in = 1;	/* not UTF-8: each byte on its own */
		return (size_t)snprintf(esc, CB_ESC_UNIT + 1, "\\x%02x", s[0]);
	}
	*in = n;
	while (s[run] == ' ')
		run++;
	if (run > CB_SPACE_RUN) {
		*in = run;
		return (size_t)snprintf(esc, CB_ESC_UNIT + 1, "\\x20{%zu}", run);
	}
	if (cp == '\\')
		return (size_t)snprintf(esc, CB_ESC_UNIT + 1, "\\\\");
	if (cp < 0x80 && cb_text_invisible(cp))
		return (size_t)snprintf(esc, CB_ESC_UNIT + 1, "\\x%02x", (unsigned)cp);
	if (cb_text_escaped(cp))
		return (size_t)snprintf(esc, CB_ESC_UNIT + 1, cp > 0xffff ? "\\U%08x" : "\\u%04x",
		    (unsigned)cp);
	*out = (const char *)s;
	return n;
}

char *
cb_text_utf8(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s), k = 0;
	char *out = malloc(3 * n + 1);	/* a byte becomes at most 3 (U+FFFD) */

	if (out == NULL)
		return NULL;
	while (*u) {
		uint32_t cp;
		size_t l = cb_utf8_dec(u, &cp);

		if (l == 0) {
			memcpy(out + k, "\xef\xbf\xbd", 3);
			k += 3;
			u++;
		} else {
			memcpy(out + k, u, l);
			k += l;
			u += l;
		}
	}
	out[k] = '\0';
	return out;
}

size_t
cb_text_esc(char *dst, size_t len, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t total = 0, o = 0, in, n;
	bool full = len == 0;
	char esc[CB_ESC_UNIT + 1];
	const char *piece;

	while (*p) {
		n = cb_esc_one(p, esc, &piece, &in);
		/* Never a half escape or half a character: a truncated display
		 * stays exactly a prefix of the full one. */
		if (!full && o + n < len) {
			memcpy(dst + o, piece, n);
			o += n;
		} else {
			full = true;
		}
		total += n;
		p += in;
	}
	if (len)
		dst[o] = '\0';
	return total;
}

int
cb_text_fputs(const char *s, FILE *f)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	char esc[CB_ESC_UNIT + 1];
	const char *piece;
	size_t in, n;

	while (*p) {
		n = cb_esc_one(p, esc, &piece, &in);
		if (fwrite(piece, 1, n, f) != n)
			return CB_EIO;
		p += in;
	}
	return 0;
}

const char *
cb_text_show(char *dst, size_t len, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	char esc[CB_ESC_UNIT + 1];
	const char *piece;
	size_t o = 0, in, n;

	if (len == 0)
		return dst;
	if (max > len - 1)
		max = len - 1;
	/* room for the marker when the text is cut */
	if (cb_text_esc(NULL, 0, s) > max)
		max = max > CB_TEXT_SHOW_MARK ? max - CB_TEXT_SHOW_MARK : 0;
	while (*p) {
		n = cb_esc_one(p, esc, &piece, &in);
		if (o + n > max)
			break;
		memcpy(dst + o, piece, n);
		o += n;
		p += in;
	}
	dst[o] = '\0';
	if (*p)
		snprintf(dst + o, len - o, "[... %zu more bytes]", strlen((const char *)p));
	return dst;
}
