/*
 * test_policy_errors.c - every error class of a policy file is reported
 * with file:line and refuses the whole policy.  Each case writes a small
 * policy to a temporary directory and checks the exact line and class.
 */
#include "policy/policy.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tap.h"

static char tmpdir[] = "/tmp/cbpoleXXXXXX";
static char *last_errs;

/* Load text from a file named NAME in tmpdir; keep what was printed. */
static int
load(const char *text, struct pol **out)
{
	char *path = NULL;
	size_t len = 0;
	FILE *f, *errs;
	int r;

	free(last_errs);
	last_errs = NULL;
	if (asprintf(&path, "%s/t.conf", tmpdir) < 0 || !(f = fopen(path, "w")))
		abort();
	fputs(text, f);
	fclose(f);
	if (!(errs = open_memstream(&last_errs, &len)))
		abort();
	r = pol_load(path, out, errs);
	fclose(errs);
	free(path);
	return r;
}

/* text must be refused, with a line "t.conf:LINE: WANT..." among the errors
 * (WANT a prefix of the message), and nothing loaded. */
static void
refused(const char *title, const char *text, unsigned line, const char *want)
{
	struct pol *p = (struct pol *)1;
	char *needle = NULL;
	int r = load(text, &p);
	bool found;

	if (asprintf(&needle, "/t.conf:%u: %s", line, want) < 0)
		abort();
	found = last_errs && strstr(last_errs, needle);
	T_OK(r == CB_EINVAL && p == NULL && found, "%s", title);
	if (!found || r != CB_EINVAL)
		printf("#   want '%s' (r=%d), got:\n#   %s\n", needle, r, last_errs ? last_errs : "");
	fflush(stdout);
	free(needle);
}

static void
accepted(const char *title, const char *text)
{
	struct pol *p = NULL;
	int r = load(text, &p);

	T_OK(r == 0 && p != NULL, "%s", title);
	if (r != 0)
		printf("#   %s\n", last_errs ? last_errs : "");
	pol_free(p);
}

static int
count_lines(const char *s)
{
	int n = 0;

	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* Load path as it is; keep what was printed. */
static int
load_path(const char *path)
{
	struct pol *p = NULL;
	size_t len = 0;
	FILE *errs;
	int r;

	free(last_errs);
	last_errs = NULL;
	if (!(errs = open_memstream(&last_errs, &len)))
		abort();
	r = pol_load(path, &p, errs);
	fclose(errs);
	pol_free(p);
	return r;
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
	if (chmod(path, mode) != 0)
		abort();
}

/* Issue 10, hole 11: a policy file (and what it includes, and the
 * directories above it) that others could write is refused, like a key
 * file. */
static void
test_file_modes(void)
{
	char *dir = NULL, *f = NULL, *inc = NULL, *sub = NULL, *subf = NULL;

	if (asprintf(&dir, "%s/modes", tmpdir) < 0 || mkdir(dir, 0755) != 0 ||
	    asprintf(&f, "%s/p.conf", dir) < 0 || asprintf(&inc, "%s/inc.conf", dir) < 0 ||
	    asprintf(&sub, "%s/open", dir) < 0 || asprintf(&subf, "%s/open/p.conf", dir) < 0)
		abort();
	write_file(f, "version = 1;\n", 0644);
	T_ERR(load_path(f), 0, "a 0644 policy file of ours loads");
	write_file(f, "version = 1;\n", 0646);
	T_ERR(load_path(f), CB_EINVAL, "a world-writable policy file is refused");
	T_OK(last_errs && strstr(last_errs, "not writable by group or others"),
	    "... saying who may not write it (%s)", last_errs ? last_errs : "");
	write_file(f, "version = 1;\n", 0664);
	T_ERR(load_path(f), CB_EINVAL, "a group-writable policy file is refused");
	write_file(f, "version = 1;\n", 0600);
	if (geteuid() == 0) {
		T_OK(chown(f, 65534, 65534) == 0, "chown to another user");
		T_ERR(load_path(f), CB_EINVAL, "a policy file owned by another user is refused");
		T_OK(chown(f, 0, 0) == 0, "chown back");
	}
	write_file(f, "version = 1;\n@include \"inc.conf\"\n", 0644);
	write_file(inc, "defaults = { ttl = 60; };\n", 0644);
	T_ERR(load_path(f), 0, "an @include of a 0644 file loads");
	write_file(inc, "defaults = { ttl = 60; };\n", 0666);
	T_ERR(load_path(f), CB_EINVAL, "an @include of a world-writable file is refused");
	T_OK(last_errs && strstr(last_errs, "inc.conf"), "... naming it");
	write_file(f, "version = 1;\n  @include \"/nonexistent/x.conf\"\n", 0644);
	T_ERR(load_path(f), CB_EINVAL, "an @include that cannot be checked is refused");
	write_file(f, "version = 1;\n@include \"a\\\\b\"\n", 0644);
	T_ERR(load_path(f), CB_EINVAL, "an @include name with an escape is refused");
	if (mkdir(sub, 0777) != 0 || chmod(sub, 0777) != 0)
		abort();
	write_file(subf, "version = 1;\n", 0644);
	T_ERR(load_path(subf), CB_EINVAL, "a policy in a world-writable directory is refused");
	T_OK(last_errs && strstr(last_errs, "directory"), "... naming the directory");
	if (chmod(sub, 01777) != 0)
		abort();
	T_ERR(load_path(subf), 0, "... but a sticky one (like /tmp) protects it");
	free(dir);
	free(f);
	free(inc);
	free(sub);
	free(subf);
}

int
main(void)
{
	struct pol *p = NULL;
	char cmd[64];

	if (!mkdtemp(tmpdir))
		return 1;

	test_file_modes();
	accepted("empty file: the default policy", "");
	accepted("comments of every style", "# a\n// b\n/* c */\nversion = 1;\n");

	/* syntax */
	refused("syntax error with its line", "version = 1;\ndefaults = {\n  ttl = ;\n};\n", 3, "syntax error");
	refused("duplicate setting is a syntax error", "defaults = { ttl = 1; ttl = 2; };\n", 1, "syntax error");
	/* libconfig reports an unterminated string where the file ends */
	refused("unterminated string", "defaults = {\n tier = \"low;\n};\n", 4, "syntax error");

	/* unknown keys, at every level */
	refused("unknown top-level key", "version = 1;\nceiling = [ ];\n", 2, "unknown key \"ceiling\" in the policy");
	refused("unknown key in defaults", "defaults = {\n  tll = 5;\n};\n", 2, "unknown key \"tll\" in defaults");
	refused("unknown key in admins", "admins = { users = [ 1 ]; };\n", 1, "unknown key \"users\"");
	refused("unknown key in network", "network = { allow = [ ]; };\n", 1, "unknown key \"allow\"");
	refused("unknown key in a tier", "tiers = {\n low = {\n  ceilng = [ ];\n };\n};\n", 3,
	    "unknown key \"ceilng\" in tier \"low\"");
	refused("unknown key in limits", "tiers = { low = { limits = {\n fds = 3; }; }; };\n", 2,
	    "unknown key \"fds\" in limits");
	refused("unknown key in a rule", "tiers = { low = { requestable = (\n { caps = [ ]; ttl = 5; }\n ); }; };\n",
	    2, "unknown key \"ttl\" in a requestable rule");

	/* wrong types */
	refused("wrong type: string for a number", "defaults = {\n ttl = \"1h\";\n};\n", 2, "wrong type for \"ttl\"");
	refused("wrong type: float for a number", "defaults = { ttl = 1.5; };\n", 1, "wrong type for \"ttl\": a float");
	refused("wrong type: number for a string", "defaults = { tier = 3; };\n", 1, "wrong type for \"tier\"");
	refused("wrong type: string for a list", "tiers = { low = { ceiling = \"proc.exec:/bin/ls\"; }; };\n", 1,
	    "wrong type for \"ceiling\"");
	refused("wrong type: number in a capability list",
	    "tiers = { low = { ceiling = (\n \"proc.exec:/bin/ls\",\n 5 ); }; };\n", 3, "wrong type for element 2");
	refused("wrong type: tier not a group", "tiers = { low = 5; };\n", 1, "wrong type for \"low\"");
	refused("wrong type: section not a group", "defaults = [ 1 ];\n", 1, "wrong type for \"defaults\"");
	refused("wrong type: requestable an array", "tiers = { low = { requestable = [ \"x\" ]; }; };\n", 1,
	    "wrong type for \"requestable\"");
	refused("wrong type: uid a string", "admins = { uids = [ \"root\" ]; };\n", 1, "wrong type for element 1");
	refused("wrong type: version", "version = \"1\";\n", 1, "wrong type for \"version\"");

	/* malformed capabilities: cb_strerror of cap_parse's code */
	refused("malformed capability: relative path", "tiers = { high = { ceiling = [\n \"fs.read:etc/**\" ]; }; };\n",
	    2, "malformed capability \"fs.read:etc/**\": path is not absolute");
	refused("malformed capability: unknown op", "tiers = { high = { ceiling = [ \"fs.exec:/x\" ]; }; };\n",
	    1, "malformed capability \"fs.exec:/x\": unknown capability operation");
	refused("malformed capability: no colon", "tiers = { high = { ceiling = [ \"everything\" ]; }; };\n",
	    1, "malformed capability \"everything\": capability is not OP:RESOURCE");
	refused("malformed capability: dotdot", "tiers = { high = { ceiling = [ \"fs.read:/a/../b\" ]; }; };\n",
	    1, "malformed capability \"fs.read:/a/../b\": path has a . or .. component");
	refused("malformed capability: port", "tiers = { high = { ceiling = [ \"net.connect:a.com:99999\" ]; }; };\n",
	    1, "malformed capability \"net.connect:a.com:99999\": malformed port");
	refused("malformed capability: misplaced ${workspace}",
	    "tiers = { medium = { ceiling = [ \"fs.read:/home/${workspace}/**\" ]; }; };\n", 1,
	    "malformed capability \"fs.read:/home/${workspace}/**\": ${workspace} may only open");
	refused("malformed capability: ${workspace} glued to a name",
	    "tiers = { medium = { ceiling = [ \"fs.read:${workspace}x/**\" ]; }; };\n", 1, "malformed capability");
	refused("malformed capability in requestable",
	    "tiers = { low = { requestable = ( { caps = [\n \"proc.exec:bin\" ]; } ); }; };\n", 2,
	    "malformed capability \"proc.exec:bin\"");
	refused("malformed domain in allow list", "network = { allow_domains = [ \"pypi.org:443\" ]; };\n", 1,
	    "invalid value \"pypi.org:443\" in \"allow_domains\"");
	refused("an IP in the domain allow list", "network = { allow_domains = [ \"10.0.0.1\" ]; };\n", 1,
	    "invalid value \"10.0.0.1\"");

	/* ceilings wider than the tier allows */
	refused("low: host files", "tiers = { low = { ceiling = [\n \"fs.read:/etc/passwd\" ]; }; };\n", 2,
	    "ceiling wider than tier \"low\" allows: \"fs.read:/etc/passwd\"");
	refused("last element of a multi-line list: its own line, not the bracket's",
	    "tiers = { low = { ceiling = [\n \"proc.exec:/bin/ls\",\n \"fs.read:/x\"\n ];\n }; };\n", 3,
	    "ceiling wider than tier \"low\" allows: \"fs.read:/x\"");
	refused("low: host /tmp", "tiers = { low = { ceiling = [ \"fs.write:/tmp/**\" ]; }; };\n", 1,
	    "ceiling wider than tier \"low\" allows");
	refused("low: network", "tiers = { low = { ceiling = [ \"net.connect:example.com:443\" ]; }; };\n", 1,
	    "ceiling wider than tier \"low\" allows: \"net.connect:example.com:443\"");
	refused("low: tool wildcard", "tiers = { low = { ceiling = [ \"proc.exec:/usr/bin/*\" ]; }; };\n", 1,
	    "ceiling wider than tier \"low\" allows: \"proc.exec:/usr/bin/*\"");
	refused("low: fs.* workspace", "tiers = { low = { ceiling = [ \"fs.*:${workspace}/**\" ]; }; };\n", 1,
	    "ceiling wider than tier \"low\" allows");
	refused("low: read-only binds", "tiers = { low = {\n ro_binds = [ \"/usr/share\" ]; }; };\n", 2,
	    "wider than tier \"low\" allows: ro_binds");
	refused("low: exec list", "tiers = { low = { exec = [ \"/usr/bin/python3\" ]; }; };\n", 1,
	    "wider than tier \"low\" allows: exec");
	refused("low: programs added to its (empty) exec list",
	    "tiers = { low = {\n exec_add = [ \"/usr/bin/curl\" ]; }; };\n", 2,
	    "wider than tier \"low\" allows: exec_add");
	refused("low: host files added to its ceiling",
	    "tiers = { low = {\n ceiling_add = [ \"fs.read:/etc/**\" ]; }; };\n", 2,
	    "ceiling wider than tier \"low\" allows: \"fs.read:/etc/**\"");
	refused("medium: a ceiling_add beyond the workspace",
	    "tiers = { medium = { ceiling_add = [\n \"fs.read:/home/**\" ]; }; };\n", 2,
	    "ceiling wider than tier \"medium\" allows: \"fs.read:/home/**\"");
	refused("exec_add: a relative path", "tiers = { medium = { exec_add = [ \"bin/curl\" ]; }; };\n", 1,
	    "invalid path \"bin/curl\" in exec_add");
	refused("medium: files beyond the workspace", "tiers = { medium = { ceiling = [ \"fs.read:/home/**\" ]; }; };\n",
	    1, "ceiling wider than tier \"medium\" allows: \"fs.read:/home/**\"");
	/* the validator's stand-in workspace, written literally, is no workspace */
	refused("medium: a literal path, not ${workspace}",
	    "tiers = { medium = { ceiling = [ \"fs.read:/capbroker-workspace/**\" ]; }; };\n", 1,
	    "ceiling wider than tier \"medium\" allows");
	refused("medium: workspace's parent", "tiers = { medium = { ceiling = [ \"fs.*:${workspace}/../**\" ]; }; };\n",
	    1, "malformed capability");
	refused("medium: any host", "tiers = { medium = { ceiling = [ \"net.connect:*:443\" ]; }; };\n", 1,
	    "ceiling wider than tier \"medium\" allows: \"net.connect:*:443\"");
	refused("medium: address range", "tiers = { medium = { ceiling = [ \"net.connect:10.0.0.0/8:*\" ]; }; };\n", 1,
	    "ceiling wider than tier \"medium\" allows");
	refused("medium: host outside the allow list",
	    "network = { allow_domains = [ \"*.python.org\" ]; };\n"
	    "tiers = { medium = { ceiling = [\n \"net.connect:docs.python.org:443\",\n \"net.connect:evil.com:443\" ]; }; };\n",
	    4, "ceiling wider than tier \"medium\" allows: \"net.connect:evil.com:443\"");
	accepted("medium: hosts inside the allow list",
	    "network = { allow_domains = [ \"*.python.org\" ]; };\n"
	    "tiers = { medium = { ceiling = [ \"net.connect:docs.python.org:443\", \"net.connect:*.python.org:*\",\n"
	    "  \"net.connect:192.0.2.7:443\", \"fs.read:${workspace}/src/**\", \"fs.list:${workspace}\" ]; }; };\n");
	refused("medium: tool wildcard", "tiers = { medium = { ceiling = [ \"proc.exec:/usr/**\" ]; }; };\n", 1,
	    "ceiling wider than tier \"medium\" allows");
	refused("medium: writable binds", "tiers = { medium = { rw_binds = [ \"/srv\" ]; }; };\n", 1,
	    "wider than tier \"medium\" allows: rw_binds");
	accepted("high: anything", "tiers = { high = { ceiling = [ \"fs.*:/**\", \"net.connect:*:*\" ];\n"
	    " rw_binds = [ \"/srv\" ]; }; };\n");
	accepted("named tier: no cap", "tiers = { ci = { ceiling = [ \"net.connect:*:*\" ]; rw_binds = [ \"/srv\" ]; }; };\n");

	/* limits and numbers */
	refused("negative limit", "tiers = { low = { limits = {\n memory = -1; }; }; };\n", 2,
	    "negative limit \"memory\": -1");
	refused("negative limit as a size string", "tiers = { low = { limits = { tmp_size = \"-5M\"; }; }; };\n", 1,
	    "negative limit \"tmp_size\"");
	refused("negative cpu", "tiers = { high = { limits = { cpu = -60; }; }; };\n", 1, "negative limit \"cpu\"");
	refused("zero limit", "tiers = { low = { limits = { processes = 0; }; }; };\n", 1,
	    "out of range: \"processes\" is 0");
	/* Limits the stub would refuse at every start (review finding: check-policy said ok). */
	refused("open_files below the sandbox's 16", "tiers = { low = { limits = {\n open_files = 8; }; }; };\n", 2,
	    "out of range for a sandbox: \"open_files\" is 8 (expected at least 16)");
	refused("memory below the sandbox's 16 MiB", "tiers = { medium = { limits = { memory = \"4M\"; }; }; };\n", 1,
	    "out of range for a sandbox: \"memory\" is 4194304 (expected at least 16777216)");
	refused("memory above the sandbox's 16 TiB", "tiers = { high = { limits = { memory = \"32T\"; }; }; };\n", 1,
	    "out of range for a sandbox: \"memory\" is 35184372088832 (expected at most 17592186044416)");
	refused("file_size below a page", "tiers = { low = { limits = { file_size = 100; }; }; };\n", 1,
	    "out of range for a sandbox: \"file_size\" is 100");
	refused("tmp_size below 64K", "tiers = { low = { limits = { tmp_size = \"1K\"; }; }; };\n", 1,
	    "out of range for a sandbox: \"tmp_size\" is 1024");
	refused("processes above 2^20", "tiers = { low = { limits = { processes = 2000000; }; }; };\n", 1,
	    "out of range for a sandbox: \"processes\" is 2000000");
	refused("negative ttl", "defaults = { ttl = -1; };\n", 1, "negative value \"ttl\"");
	refused("negative max_ttl", "tiers = { low = { requestable = ( { caps = [ ]; max_ttl = -3; } ); }; };\n", 1,
	    "negative value \"max_ttl\"");
	refused("bad size suffix", "tiers = { low = { limits = { memory = \"512MB\"; }; }; };\n", 1,
	    "invalid value \"512MB\" for \"memory\"");
	refused("size overflow", "tiers = { low = { limits = { memory = \"99999999999T\"; }; }; };\n", 1,
	    "invalid value");
	refused("integer libconfig 1.5 would truncate", "tiers = { high = { limits = {\n memory = 8589934592; }; }; };\n",
	    2, "out of range: \"memory\" does not fit 32 bits");
	refused("integer that would wrap negative", "defaults = { ttl = 2147483648; };\n", 1,
	    "out of range: \"ttl\" does not fit 32 bits");
	refused("huge integer", "defaults = { request_expiry = 99999999999999999999; };\n", 1, "out of range");
	accepted("same value with the L suffix", "tiers = { high = { limits = { memory = 8589934592L; }; }; };\n");
	refused("uid that would truncate", "admins = { uids = [ 1000, 4294967296 ]; };\n", 1,
	    "out of range: element 2 of \"uids\"");
	refused("negative uid", "admins = { uids = [ -1 ]; };\n", 1, "out of range: id -1");
	refused("uid -1 spelled 4294967295L", "admins = { uids = [ 4294967295L ]; };\n", 1, "out of range");

	/* tier references and values */
	refused("unknown default tier", "tiers = { x = { }; };\ndefaults = {\n tier = \"mediun\";\n};\n", 3,
	    "unknown tier \"mediun\" (expected one of: low, medium, high, x)");
	refused("unknown extends", "tiers = {\n x = { extends = \"nosuch\"; };\n};\n", 2, "unknown tier \"nosuch\"");
	refused("extends a tier defined later", "tiers = {\n a = { extends = \"b\"; };\n b = { };\n};\n", 2,
	    "unknown tier \"b\"");
	refused("built-in tier extends", "tiers = { low = { extends = \"high\"; }; };\n", 1, "invalid value");
	accepted("default tier defined in the same file", "defaults = { tier = \"ci\"; };\ntiers = { ci = { }; };\n");
	refused("invalid approval", "tiers = { low = { requestable = ( { caps = [ ];\n approval = \"maybe\"; } ); }; };\n",
	    2, "invalid value \"maybe\" for \"approval\"");
	refused("invalid audit_fsync", "defaults = { audit_fsync = \"sometimes\"; };\n", 1,
	    "invalid value \"sometimes\" for \"audit_fsync\"");
	refused("invalid version", "version = 2;\n", 1, "invalid value 2 for \"version\"");
	refused("rule without caps", "tiers = { low = { requestable = ( { approval = \"human\"; } ); }; };\n", 1,
	    "missing key \"caps\"");
	refused("relative bind", "tiers = { high = { ro_binds = [ \"etc\" ]; }; };\n", 1, "invalid path \"etc\"");
	refused("bind with ..", "tiers = { high = { rw_binds = [ \"/srv:/a/../b\" ]; }; };\n", 1, "invalid path \"/a/../b\"");
	refused("exec with a wildcard", "tiers = { medium = { exec = [ \"/usr/bin/*\" ]; }; };\n", 1,
	    "invalid path \"/usr/bin/*\"");
	refused("workspace /", "tiers = { medium = { workspace = \"/\"; }; };\n", 1, "invalid path \"/\" in workspace");

	/* many errors: all reported, then refused */
	T_ERR(load("defaults = { ttl = -1; tier = 5; };\n"
	    "tiers = { low = { ceiling = [ \"fs.read:/x\" ]; limits = { cpu = -1; }; }; };\n", &p), CB_EINVAL,
	    "several errors refuse the policy");
	T_OK(count_lines(last_errs) == 5 && strstr(last_errs, "4 errors; policy refused"),
	    "every error is reported, and a summary");
	for (char *l = last_errs, *e; l && *l; l = e + 1) {
		if (!(e = strchr(l, '\n')))
			break;
		printf("#   %.*s\n", (int)(e - l), l);
	}

	/* files */
	p = NULL;
	T_ERR(pol_load("/nonexistent/policy.conf", &p, NULL), CB_EINVAL, "missing file refused");
	T_OK(p == NULL, "missing file: nothing loaded");
	{
		char *path = NULL, *inc = NULL;
		FILE *f;

		if (asprintf(&path, "%s/main.conf", tmpdir) < 0 || asprintf(&inc, "%s/tiers.inc", tmpdir) < 0)
			abort();
		if (!(f = fopen(inc, "w")))
			abort();
		fputs("tiers = {\n  low = { limits = { cpu = -2; }; };\n};\n", f);
		fclose(f);
		if (!(f = fopen(path, "w")))
			abort();
		fputs("version = 1;\n@include \"tiers.inc\"\n", f);
		fclose(f);
		free(last_errs);
		last_errs = NULL;
		{
			size_t len;
			FILE *errs = open_memstream(&last_errs, &len);

			T_ERR(pol_load(path, &p, errs), CB_EINVAL, "@include: errors in the included file");
			fclose(errs);
		}
		T_OK(last_errs && strstr(last_errs, "tiers.inc:2: negative limit \"cpu\""),
		    "@include: error names the included file and its line");
		free(path);
		free(inc);
	}

	free(last_errs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmpdir);
	return t_done();
}
