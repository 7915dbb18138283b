/*
 * cmd.c - the policy commands of capbroker: check-policy and show-policy.
 * Trust domain: the administrator's shell; they read a file and print.
 */
#include "policy/pol_int.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>

/*
 * What only this machine can tell: a bind source that does not exist stops
 * every sandbox of its tier at start-up (the stub cannot capture it), so it
 * is an error here too.  A tier's workspace that does not exist is only a
 * warning: `run --workspace DIR` replaces it.  Returns the error count.
 */
static size_t
check_machine(const struct pol *p, const char *path)
{
	size_t errors = 0;
	struct stat st;

	for (size_t i = 0; i < pol_tier_count(p); i++) {
		const struct pol_tier *t = pol_tier_at(p, i);
		const struct pol_bind *b;
		size_t nb = pol_tier_binds(t, &b);
		const char *ws = pol_tier_workspace(t);

		/* Names from the file reach a person: through the one escaper. */
		for (size_t k = 0; k < nb; k++) {
			int e;

			if (stat(b[k].src, &st) == 0)
				continue;
			e = errno;
			cb_ignore(cb_text_fputs(path, stderr));
			fputs(": tier \"", stderr);
			cb_ignore(cb_text_fputs(pol_tier_name(t), stderr));
			fputs("\": bind source ", stderr);
			cb_ignore(cb_text_fputs(b[k].src, stderr));
			fprintf(stderr, ": %s (no sandbox of this tier could start)\n", strerror(e));
			errors++;
		}
		if (ws && (stat(ws, &st) != 0 || !S_ISDIR(st.st_mode))) {
			cb_ignore(cb_text_fputs(path, stderr));
			fputs(": warning: tier \"", stderr);
			cb_ignore(cb_text_fputs(pol_tier_name(t), stderr));
			fputs("\": workspace ", stderr);
			cb_ignore(cb_text_fputs(ws, stderr));
			fputs(" is not a directory here: start it with --workspace DIR\n", stderr);
		}
	}
	return errors;
}

/* The one FILE operand of "CMD [--] FILE"; NULL if absent or misused.
 * *help is set for -h / --help. */
static const char *
file_arg(int argc, char **argv, bool optional, bool *help)
{
	int i = 1;

	*help = false;
	if (i < argc && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
		*help = true;
		return NULL;
	}
	if (i < argc && strcmp(argv[i], "--") == 0)
		i++;
	else if (i < argc && argv[i][0] == '-' && argv[i][1] != '\0')
		return NULL;
	if (i == argc)
		return optional ? "" : NULL;
	if (i + 1 != argc || argv[i][0] == '\0')
		return NULL;
	return argv[i];
}

int
pol_cmd_check(int argc, char **argv)
{
	struct pol *p = NULL;
	const char *path;
	bool help;
	size_t n;
	int r;

	if (!(path = file_arg(argc, argv, false, &help))) {
		fprintf(help ? stdout : stderr, "usage: capbroker check-policy FILE\n");
		return help ? 0 : EX_USAGE;
	}
	if ((r = pol_load(path, &p, stderr)) != 0) {
		if (r != CB_EINVAL) {
			cb_ignore(cb_text_fputs(path, stderr));
			fprintf(stderr, ": %s\n", cb_strerror(r));
		}
		return 1;
	}
	if ((n = check_machine(p, path)) != 0) {
		fprintf(stderr, "%zu error%s; policy refused\n", n, n == 1 ? "" : "s");
		pol_free(p);
		return 1;
	}
	/* Names from the file reach a person: through the one escaper. */
	cb_ignore(cb_text_fputs(path, stdout));
	fputs(": ok (tiers:", stdout);
	for (size_t i = 0; i < pol_tier_count(p); i++) {
		fputc(' ', stdout);
		cb_ignore(cb_text_fputs(pol_tier_name(pol_tier_at(p, i)), stdout));
	}
	fputs("; default tier ", stdout);
	cb_ignore(cb_text_fputs(pol_default_tier(p), stdout));
	fputs(")\n", stdout);
	pol_free(p);
	return 0;
}

int
pol_cmd_show(int argc, char **argv)
{
	struct pol *p = NULL;
	const char *path;
	bool help;
	int r, ret = 1;

	if (!(path = file_arg(argc, argv, true, &help))) {
		fprintf(help ? stdout : stderr, "usage: capbroker show-policy [FILE]\n");
		return help ? 0 : EX_USAGE;
	}
	r = *path ? pol_load(path, &p, stderr) : pol_default(&p);
	if (r != 0) {
		if (r != CB_EINVAL)
			fprintf(stderr, "%s: %s\n", *path ? path : "built-in policy", cb_strerror(r));
		return 1;
	}
	if (pol_print(p, stdout) != 0)
		fprintf(stderr, "show-policy: write error\n");
	else
		ret = 0;
	pol_free(p);
	return ret;
}
