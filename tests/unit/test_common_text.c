/*
 * test_common_text.c - the one escaper (common/text.c) against text that
 * draws where it should not: combining marks, spaces other than U+0020,
 * the braille blank, runs of spaces, and reasons too long for a prompt
 * (the red-team pass over issue 10: a long reason wrapped into a fake
 * block under the real capability line).
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
	char buf[512], *mem = NULL;
	size_t n, mlen = 0;
	FILE *f;

	n = cb_text_esc(buf, sizeof(buf), in);
	if (!(f = open_memstream(&mem, &mlen)))
		abort();
	T_OK(cb_text_fputs(in, f) == 0, "%s: fputs succeeds", title);
	fclose(f);
	T_OK(n == strlen(want) && strcmp(buf, want) == 0 && strcmp(mem, want) == 0, "%s", title);
	if (strcmp(buf, want) != 0 || strcmp(mem, want) != 0)
		printf("#   got '%s' / '%s', want '%s'\n", buf, mem, want);
	free(mem);
}

/* The UTF-8 form of cp in buf. */
static const char *
utf8(uint32_t cp, char buf[5])
{
	if (cp < 0x80) {
		buf[0] = (char)cp;
		buf[1] = 0;
	} else if (cp < 0x800) {
		buf[0] = (char)(0xc0 | cp >> 6);
		buf[1] = (char)(0x80 | (cp & 0x3f));
		buf[2] = 0;
	} else if (cp < 0x10000) {
		buf[0] = (char)(0xe0 | cp >> 12);
		buf[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		buf[2] = (char)(0x80 | (cp & 0x3f));
		buf[3] = 0;
	} else {
		buf[0] = (char)(0xf0 | cp >> 18);
		buf[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		buf[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		buf[3] = (char)(0x80 | (cp & 0x3f));
		buf[4] = 0;
	}
	return buf;
}

/* Each code point of list is shown as its \u escape. */
static void
escaped_each(const char *what, const uint32_t *list, size_t n)
{
	char in[5], got[32], want[16];
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		cb_text_esc(got, sizeof(got), utf8(list[i], in));
		snprintf(want, sizeof(want), list[i] > 0xffff ? "\\U%08x" : "\\u%04x", list[i]);
		if (strcmp(got, want) != 0) {
			printf("#   U+%04X shown as '%s'\n", list[i], got);
			bad++;
		}
	}
	T_OK(bad == 0, "%s: each shown as its escape", what);
}

static void
test_marks(void)
{
	/* nonspacing (Mn) in several scripts and enclosing (Me) marks */
	static const uint32_t marks[] = {
		0x0300, 0x0301, 0x0336, 0x0338, 0x036f, 0x0483, 0x0489, 0x0591, 0x05c7, 0x064b,
		0x0670, 0x093c, 0x0e31, 0x0f71, 0x1ab0, 0x1dc0, 0x20d0, 0x20dd, 0x20e3, 0x20f0,
		0xa670, 0xfe20, 0xfe2f, 0x101fd, 0x1d167, 0x1e8d0,
	};

	escaped_each("combining marks (Mn, Me)", marks, sizeof(marks) / sizeof(marks[0]));
	esc("stacked marks cannot draw over the line above or below",
	    "a\xcc\x81\xcc\x81\xcc\x81" "b", "a\\u0301\\u0301\\u0301b");
	esc("an overlay cannot turn = into a look-alike of another sign", "x=\xcc\xb8y",
	    "x=\\u0338y");
	esc("a precomposed letter is kept", "caf\xc3\xa9", "caf\xc3\xa9");
	esc("spacing marks (Mc) and letters around marks are kept",
	    "\xe0\xa4\x95\xe0\xa4\xbe", "\xe0\xa4\x95\xe0\xa4\xbe");	/* KA, sign AA (Mc) */
}

static void
test_spaces(void)
{
	static const uint32_t odd[] = {
		0x00a0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007,
		0x2008, 0x2009, 0x200a, 0x202f, 0x205f, 0x3000, 0x2800,
	};

	escaped_each("spaces other than U+0020, and the braille blank", odd,
	    sizeof(odd) / sizeof(odd[0]));
	esc("one, two and three spaces are kept", "a b  c   d", "a b  c   d");
	esc("a run of four spaces is counted", "a    b", "a\\x20{4}b");
	esc("a long run is one short escape", "x                                        "
	    "                                        y", "x\\x20{80}y");
	esc("a run at the end, and runs around text", "    a     ", "\\x20{4}a\\x20{5}");
	esc("braille blanks and ideographic spaces cannot pad a line either",
	    "a\xe2\xa0\x80\xe2\xa0\x80\xe3\x80\x80" "b", "a\\u2800\\u2800\\u3000b");
	esc("a backslash before a run stays unambiguous", "\\    ", "\\\\\\x20{4}");
}

/* The worst case of the documented buffer size holds for every input
 * kind, and the display never has a raw control or a mark. */
static void
test_bounds(void)
{
	static const char *const kinds[] = { " ", "\xff", "\xcc\x81", "\xe2\x80\x80", "\xf3\xa0\x81\x81",
		"\x1b", "a", "\\" };
	char in[4096], *out;
	size_t n, worst = 0, bad = 0;

	srand(7);
	for (int round = 0; round < 2000; round++) {
		size_t len = 0;

		while (len < sizeof(in) - 8) {
			const char *k = kinds[rand() % 8];
			size_t kl = strlen(k);

			if (rand() % 50 == 0)
				break;
			memcpy(in + len, k, kl);
			len += kl;
		}
		in[len] = '\0';
		n = cb_text_esc(NULL, 0, in);
		if (n > CB_ESC_SIZE(len) - 1)
			bad++;
		if (n > worst)
			worst = n;
		out = malloc(CB_ESC_SIZE(len));
		if (!out || cb_text_esc(out, CB_ESC_SIZE(len), in) != n || strlen(out) != n)
			bad++;
		for (const unsigned char *p = (const unsigned char *)out; out && *p; p++)
			if (*p < 0x20 || *p == 0x7f || (p[0] == 0xcc && p[1] == 0x81))
				bad++;
		free(out);
	}
	T_OK(bad == 0, "random mixes: the escaped text fits CB_ESC_SIZE, and has no raw control or mark");
}

static void
test_show(void)
{
	char buf[CB_TEXT_SHOW_SIZE], in[1100], small[40];
	const char *r;

	r = cb_text_show(buf, sizeof(buf), "include the host name", CB_TEXT_SHOW_MAX);
	T_OK(strcmp(r, "include the host name") == 0, "a short reason is shown whole");
	memset(in, 'x', 1000);
	in[1000] = '\0';
	r = cb_text_show(buf, sizeof(buf), in, CB_TEXT_SHOW_MAX);
	T_OK(strlen(r) <= CB_TEXT_SHOW_MAX && strstr(r, "xxx[... ") &&
	    strcmp(r + strlen(r) - strlen(" more bytes]"), " more bytes]") == 0,
	    "a 1000-byte reason is cut to CB_TEXT_SHOW_MAX, saying how much is left out");
	printf("#   %s\n", r);
	{
		size_t shown = strspn(r, "x");
		char want[64];

		snprintf(want, sizeof(want), "[... %zu more bytes]", 1000 - shown);
		T_OK(strcmp(r + shown, want) == 0, "... the count is the bytes not shown");
	}
	/* escapes are never split: 300 marks are 1800 bytes escaped */
	for (int i = 0; i < 300; i++)
		memcpy(in + 2 * i, "\xcc\x81", 2);
	in[600] = '\0';
	r = cb_text_show(buf, sizeof(buf), in, CB_TEXT_SHOW_MAX);
	T_OK(strlen(r) <= CB_TEXT_SHOW_MAX && strncmp(r, "\\u0301", 6) == 0 &&
	    strstr(r, "\\u0301[... ") && strstr(r, " more bytes]"),
	    "a reason of marks is cut between two escapes");
	r = cb_text_show(small, sizeof(small), in, CB_TEXT_SHOW_MAX);
	T_OK(strlen(r) < sizeof(small), "a buffer smaller than the bound is respected");
	r = cb_text_show(buf, sizeof(buf), NULL, CB_TEXT_SHOW_MAX);
	T_OK(strcmp(r, "") == 0, "NULL is the empty string");
	/* exactly the bound: shown whole */
	memset(in, 'y', CB_TEXT_SHOW_MAX);
	in[CB_TEXT_SHOW_MAX] = '\0';
	r = cb_text_show(buf, sizeof(buf), in, CB_TEXT_SHOW_MAX);
	T_OK(strcmp(r, in) == 0, "a reason exactly as long as the bound is shown whole");
}

/* cb_text_utf8: what PostgreSQL's UTF8 takes, the valid text unchanged. */
static void
test_utf8(void)
{
	char *u;

	u = cb_text_utf8("plain caf\xc3\xa9 \xe2\x82\xac");
	T_OK(u && strcmp(u, "plain caf\xc3\xa9 \xe2\x82\xac") == 0, "valid UTF-8 is kept as it is");
	free(u);
	u = cb_text_utf8("bad \xff byte");
	T_OK(u && strcmp(u, "bad \xef\xbf\xbd byte") == 0, "a stray byte becomes U+FFFD");
	free(u);
	u = cb_text_utf8("\xc0\xaf \xed\xa0\x80 \xe2\x82");
	T_OK(u && strcmp(u, "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
	    "\xef\xbf\xbd\xef\xbf\xbd") == 0,
	    "overlong forms, surrogates and a sequence cut short: one U+FFFD a byte");
	free(u);
}

int
main(void)
{
	test_utf8();
	test_marks();
	test_spaces();
	test_bounds();
	test_show();
	return t_done();
}
