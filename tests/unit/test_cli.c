/*
 * test_cli.c - the command-line tools' one JSON writer (cli/json.c): any
 * bytes become a valid, ASCII-only JSON document in which no control,
 * C1, DEL or bidirectional character stands as itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "tests/tap.h"

/* The printed form of v (consumed). */
static char *
dump(json_t *v)
{
	char *mem = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&mem, &len);

	if (!f)
		abort();
	if (cli_json_print(v, f) != 0)
		T_OK(false, "cli_json_print failed");
	fclose(f);
	return mem;
}

static void
str_is(const char *title, const char *in, size_t n, const char *want)
{
	char *got = dump(cli_json_strn(in, n));

	T_OK(strcmp(got, want) == 0, "%s", title);
	if (strcmp(got, want) != 0)
		printf("#   got  %s#   want %s", got, want);
	free(got);
}

int
main(void)
{
	char *got;
	json_t *o, *back;
	bool ascii = true;

	str_is("plain text", "hello", 5, "\"hello\"\n");
	str_is("quotes and backslashes", "a\"b\\c", 5, "\"a\\\"b\\\\c\"\n");
	str_is("C0 controls", "a\x01\x1b[2J\n", 7, "\"a\\u0001\\u001B[2J\\n\"\n");
	str_is("DEL, which jansson leaves alone", "x\x7fy", 3, "\"x\\u007fy\"\n");
	str_is("C1 control (U+009B CSI) as an escape", "x\xc2\x9b" "y", 4, "\"x\\u009By\"\n");
	str_is("bidi override (U+202E) as an escape", "\xe2\x80\xae" "abc", 6, "\"\\u202Eabc\"\n");
	str_is("UTF-8 kept as escapes (ASCII output)", "\xc3\xa9", 2, "\"\\u00E9\"\n");
	str_is("an invalid byte becomes U+FFFD", "a\xff" "b", 3, "\"a\\uFFFDb\"\n");
	str_is("a truncated sequence too", "a\xe2\x80", 3, "\"a\\uFFFD\\uFFFD\"\n");
	str_is("an overlong form too", "\xc0\xaf", 2, "\"\\uFFFD\\uFFFD\"\n");
	str_is("a surrogate too", "\xed\xa0\x80", 3, "\"\\uFFFD\\uFFFD\\uFFFD\"\n");
	str_is("an embedded NUL", "a\0b", 3, "\"a\\u0000b\"\n");
	str_is("NULL is the empty string", NULL, 0, "\"\"\n");

	/* An object of hostile values parses back to the same text. */
	o = json_pack("{s:b,s:o}", "ok", 0, "reason", cli_json_str("no\x1b]0;pwned\x07 \xc2\x85"));
	got = dump(o);
	for (const char *p = got; *p; p++)
		ascii &= (*p >= 0x20 && *p < 0x7f) || *p == '\n';
	T_OK(ascii, "the document is printable ASCII only");
	back = json_loads(got, 0, NULL);
	T_OK(back && strcmp(json_string_value(json_object_get(back, "reason")),
	    "no\x1b]0;pwned\x07 \xc2\x85") == 0, "... and parses back to the same text");
	T_OK(strncmp(got, "{\"ok\":false,\"reason\":", 21) == 0, "... members in the order set");
	json_decref(back);
	free(got);
	T_ERR(cli_json_print(NULL, stdout), CB_ENOMEM, "a NULL document (out of memory) is an error");
	o = json_object();
	T_ERR(cli_json_set_str(o, "k", "v\xff"), 0, "cli_json_set_str takes any bytes");
	json_decref(o);
	return t_done();
}
