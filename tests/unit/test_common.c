/*
 * test_common.c - the shared helpers: the escaper for text an agent wrote
 * and a person reads (cb_text_esc / cb_text_fputs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "tests/tap.h"

/* in must be displayed as want, by both forms. */
static void
esc(const char *title, const char *in, const char *want)
{
	char buf[256], *mem = NULL;
	size_t n, mlen = 0;
	FILE *f;

	n = cb_text_esc(buf, sizeof(buf), in);
	if (!(f = open_memstream(&mem, &mlen)))
		abort();
	T_OK(cb_text_fputs(in, f) == 0, "%s: fputs succeeds", title);
	fclose(f);
	T_OK(n == strlen(want) && strcmp(buf, want) == 0 && strcmp(mem, want) == 0,
	    "%s", title);
	if (strcmp(buf, want) != 0 || strcmp(mem, want) != 0)
		printf("#   got '%s' / '%s', want '%s'\n", buf, mem, want);
	free(mem);
}

/* No byte of s may be a control or start an invisible character. */
static bool
all_visible(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p >= 0x7f)
			return false;
	return true;
}

int
main(void)
{
	char small[8], buf[64];
	size_t n;

	esc("plain ASCII is kept", "fs.read:/etc/hostname", "fs.read:/etc/hostname");
	esc("NULL is the empty string", NULL, "");
	esc("printable UTF-8 is kept", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	esc("ESC, CR, LF, TAB and DEL become \\xNN", "a\x1b[2J\r\n\t\x7f" "b",
	    "a\\x1b[2J\\x0d\\x0a\\x09\\x7fb");
	esc("a backslash is doubled, so the display is unambiguous", "a\\x1b", "a\\\\x1b");
	esc("C1 CSI (U+009B) and NEL (U+0085)", "x\xc2\x9b" "31m\xc2\x85", "x\\u009b31m\\u0085");
	esc("bidi overrides U+202A-202E", "\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
	    "\\u202a\\u202b\\u202c\\u202d\\u202e");
	esc("bidi isolates U+2066-2069", "\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9",
	    "\\u2066\\u2067\\u2068\\u2069");
	esc("zero-width characters and marks U+200B-200F", "a\xe2\x80\x8b\xe2\x80\x8c\xe2\x80\x8d"
	    "\xe2\x80\x8e\xe2\x80\x8f" "b", "a\\u200b\\u200c\\u200d\\u200e\\u200fb");
	esc("line and paragraph separators U+2028/2029", "\xe2\x80\xa8\xe2\x80\xa9", "\\u2028\\u2029");
	esc("word joiner U+2060, BOM U+FEFF, Arabic letter mark U+061C",
	    "\xe2\x81\xa0\xef\xbb\xbf\xd8\x9c", "\\u2060\\ufeff\\u061c");
	esc("soft hyphen U+00AD and Hangul filler U+3164", "\xc2\xad\xe3\x85\xa4", "\\u00ad\\u3164");
	esc("tag characters (U+E0041) take the long form", "ok\xf3\xa0\x81\x81", "ok\\U000e0041");
	esc("variation selector U+FE0F", "\xe2\x9c\x94\xef\xb8\x8f", "\xe2\x9c\x94\\ufe0f");
	esc("invalid UTF-8: a lone continuation, a bare lead byte, 0xff", "a\x80" "b\xc3" "c\xff",
	    "a\\x80b\\xc3c\\xff");
	esc("overlong and surrogate forms are not UTF-8", "\xc0\xaf\xed\xa0\x80",
	    "\\xc0\\xaf\\xed\\xa0\\x80");
	esc("a truncated sequence at the end", "ab\xe2\x80", "ab\\xe2\\x80");

	/* The attack of issue 10: an RLO makes "fs.read:/etc/passwd#txt.x"
	 * read backwards; escaped, the override is a visible \u202e. */
	n = cb_text_esc(buf, sizeof(buf), "see \xe2\x80\xae" "dwssap/cte/ please");
	T_OK(strstr(buf, "\\u202e") && all_visible(buf), "an override is visible, nothing raw (%s)", buf);
	T_OK(n == strlen(buf), "the length returned is the length written");

	/* Truncation: snprintf-like, never half an escape. */
	n = cb_text_esc(small, sizeof(small), "ab\x1b" "cdef");
	T_OK(n == strlen("ab\\x1bcdef"), "the whole length is returned when cut (%zu)", n);
	T_OK(strcmp(small, "ab\\x1bc") == 0, "a cut display is a prefix of the full one (%s)", small);
	n = cb_text_esc(small, sizeof(small), "abcde\x1b");
	T_OK(strcmp(small, "abcde") == 0 && n == 9, "an escape that does not fit is left out whole (%s)",
	    small);
	n = cb_text_esc(small, 5, "ab\xe2\x82\xac");
	T_OK(strcmp(small, "ab") == 0, "a character that does not fit is left out whole (%s)", small);
	T_OK(cb_text_esc(NULL, 0, "abc\x01") == 7, "len 0 only measures");

	/* The worst case fits CB_ESC_SIZE. */
	{
		char in[65], out[CB_ESC_SIZE(64)];

		memset(in, 0xff, 64);
		in[64] = '\0';
		n = cb_text_esc(out, sizeof(out), in);
		T_OK(n + 1 == sizeof(out) && strlen(out) == n, "CB_ESC_SIZE holds the worst case (%zu)", n);
	}

	/* Every code point: the escaped form of an invisible one is ASCII;
	 * every other is kept as itself. */
	{
		bool ok = true;

		for (uint32_t cp = 1; cp <= 0x10ffff && ok; cp++) {
			char in[5] = "", out[32];

			if (cp >= 0xd800 && cp <= 0xdfff)
				continue;
			if (cp < 0x80) {
				in[0] = (char)cp;
			} else if (cp < 0x800) {
				in[0] = (char)(0xc0 | cp >> 6); in[1] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				in[0] = (char)(0xe0 | cp >> 12); in[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
				in[2] = (char)(0x80 | (cp & 0x3f));
			} else {
				in[0] = (char)(0xf0 | cp >> 18); in[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
				in[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); in[3] = (char)(0x80 | (cp & 0x3f));
			}
			cb_text_esc(out, sizeof(out), in);
			if (cb_text_invisible(cp) && !cb_text_escaped(cp))
				ok = false;	/* the display escapes at least what is invisible */
			else if (cb_text_escaped(cp))
				ok = all_visible(out) && out[0] == '\\';
			else
				ok = cp == '\\' ? strcmp(out, "\\\\") == 0 : strcmp(out, in) == 0;
			if (!ok)
				printf("#   U+%04X -> '%s'\n", (unsigned)cp, out);
		}
		T_OK(ok, "every code point: invisible ones, marks and odd spaces escaped to ASCII, "
		    "others kept");
	}
	T_OK(!cb_text_invisible('a') && !cb_text_invisible(0x00e9) && !cb_text_invisible(0x4e2d),
	    "letters are visible");
	return t_done();
}
