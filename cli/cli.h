/*
 * cli.h - what the command-line tools (capcall, capctl) share: their one
 * JSON writer, on Debian's jansson.
 *
 * Trust domain: the tools' own processes (an agent's capcall inside a
 * sandbox, an administrator's capctl).  Text in a document may come from an
 * agent (file names, reasons, command lines) and be any bytes: the writer
 * makes every string valid JSON and keeps the output ASCII, so nothing an
 * agent chose (C0, C1, bidi or invisible characters) reaches a terminal as
 * itself, whether a person or a program reads it.  The audit log keeps its
 * own byte-exact writer (audit/log.c): its hash chain depends on the bytes.
 */
#ifndef CB_CLI_H
#define CB_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A JSON string of the n bytes at s (NULL: ""); each byte sequence that is
 * not valid UTF-8 becomes U+FFFD.  New reference; NULL only out of memory
 * (jansson's json_object_set_new ignores NULL, failing the set). */
json_t *cli_json_strn(const char *s, size_t n);
json_t *cli_json_str(const char *s);

/* True when the n bytes at p are valid UTF-8 (what cli_json_strn keeps as
 * it is): no overlong forms, surrogates or code points past U+10FFFF. */
bool cli_utf8_valid(const void *p, size_t n);

/* Set key of object o to the string s (as cli_json_str).  0 or CB_ENOMEM. */
int cli_json_set_str(json_t *o, const char *key, const char *s);

/* Write v as one compact, ASCII-only line ending in '\n' to f and drop the
 * reference (v may be NULL: out of memory).  0, CB_ENOMEM or CB_EIO. */
int cli_json_print(json_t *v, FILE *f);

#endif
