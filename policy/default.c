/*
 * default.c - the built-in policy, used when no policy file is given and as
 * the base every policy file is applied over.  Trust domain: the broker.
 *
 * It is the contract's tier table with safe limits: low gets only a few
 * read-only tools, medium its workspace, high everything; any capability may
 * be requested at run time, a human approving it, for at most an hour.
 * The medium tier's exec list is the tools of ordinary development work
 * (issue 14): a shell, coreutils, findutils, grep, sed, awk, diffutils,
 * patch, tar, gzip, git (and its helpers), python3, make, the C compiler and
 * its helpers and binutils; and what those run themselves: xz and bzip2
 * (tar -J, -j), gettext and envsubst (git's shell commands, submodule and
 * bisect, print every message through them); and the small tools scripts
 * and build systems call: ldd, locale, getconf, which, flock, fallocate
 * (each reads the system's files or does what the agent may do anyway: ldd
 * runs the ELF loader, flock a command itself held to this list); and the
 * build systems, interpreters and everyday tools a project's own scripts
 * call: cmake, ctest, ninja, pkg-config, perl, zstd, zip, unzip, sqlite3,
 * file, jq, bc, hostname, getent, ps, tput, less (an interpreter adds no
 * authority python3 lacks; what each may touch is still the tokens').  A path
 * missing on a host is skipped when the sandbox starts; a directory grants
 * everything beneath it.
 * Kept as policy text so that it goes through the same checks as a file.
 */
#include "policy/pol_int.h"

const char pol_default_text[] =
    "version = 1;\n"
    "defaults = {\n"
    "  tier = \"low\";\n"
    "  ttl = 3600;\n"
    "  request_expiry = 300;\n"
    "  audit_fsync = \"batch\";\n"
    "  audit_budget = 100;\n"
    "  audit_burst = 1000;\n"
    "  audit_bytes = \"1M\";\n"
    "  audit_bytes_burst = \"32M\";\n"
    "  audit_throttle_max = 30;\n"
    "  pool_size = 2;\n"
    "  cluster_stale = 5;\n"
    "  served_names = 65536;\n"
    "  fs_slots = 4;\n"
    "};\n"
    "admins = { uids = [ ]; gids = [ ]; };\n"
    "network = { };\n"
    "tiers = {\n"
    "  low = {\n"
    "    ceiling = [ \"proc.exec:/usr/bin/ls\", \"proc.exec:/usr/bin/cat\", \"proc.exec:/usr/bin/wc\",\n"
    "      \"proc.exec:/usr/bin/grep\", \"proc.exec:/usr/bin/sha256sum\" ];\n"
    "    exec = [ ];\n"
    "    ro_binds = [ ];\n"
    "    rw_binds = [ ];\n"
    "    limits = { memory = \"512M\"; processes = 64; open_files = 256; file_size = \"64M\";\n"
    "      cpu = 60; wall = 600; tmp_size = \"64M\"; };\n"
    "    requestable = ( { caps = [ \"fs.*:/**\", \"net.connect:*:*\", \"proc.exec:/**\" ];\n"
    "      approval = \"human\"; max_ttl = 3600; } );\n"
    "  };\n"
    "  medium = {\n"
    "    ceiling = [ \"fs.*:${workspace}/**\", \"proc.exec:/usr/bin/ls\", \"proc.exec:/usr/bin/cat\",\n"
    "      \"proc.exec:/usr/bin/wc\", \"proc.exec:/usr/bin/grep\", \"proc.exec:/usr/bin/sha256sum\" ];\n"
    "    exec = [ \"/usr/bin/[\", \"/usr/bin/arch\", \"/usr/bin/b2sum\", \"/usr/bin/base32\",\n"
    "      \"/usr/bin/base64\", \"/usr/bin/basename\", \"/usr/bin/basenc\", \"/usr/bin/cat\",\n"
    "      \"/usr/bin/chgrp\", \"/usr/bin/chmod\", \"/usr/bin/chown\", \"/usr/bin/cksum\",\n"
    "      \"/usr/bin/comm\", \"/usr/bin/cp\", \"/usr/bin/csplit\", \"/usr/bin/cut\",\n"
    "      \"/usr/bin/date\", \"/usr/bin/dd\", \"/usr/bin/df\", \"/usr/bin/dir\",\n"
    "      \"/usr/bin/dircolors\", \"/usr/bin/dirname\", \"/usr/bin/du\", \"/usr/bin/echo\",\n"
    "      \"/usr/bin/env\", \"/usr/bin/expand\", \"/usr/bin/expr\", \"/usr/bin/factor\",\n"
    "      \"/usr/bin/false\", \"/usr/bin/fmt\", \"/usr/bin/fold\", \"/usr/bin/groups\",\n"
    "      \"/usr/bin/head\", \"/usr/bin/id\", \"/usr/bin/install\", \"/usr/bin/join\",\n"
    "      \"/usr/bin/link\", \"/usr/bin/ln\", \"/usr/bin/logname\", \"/usr/bin/ls\",\n"
    "      \"/usr/bin/md5sum\", \"/usr/bin/mkdir\", \"/usr/bin/mkfifo\", \"/usr/bin/mktemp\",\n"
    "      \"/usr/bin/mv\", \"/usr/bin/nice\", \"/usr/bin/nl\", \"/usr/bin/nohup\",\n"
    "      \"/usr/bin/nproc\", \"/usr/bin/numfmt\", \"/usr/bin/od\", \"/usr/bin/paste\",\n"
    "      \"/usr/bin/pathchk\", \"/usr/bin/pr\", \"/usr/bin/printenv\", \"/usr/bin/printf\",\n"
    "      \"/usr/bin/ptx\", \"/usr/bin/pwd\", \"/usr/bin/readlink\", \"/usr/bin/realpath\",\n"
    "      \"/usr/bin/rm\", \"/usr/bin/rmdir\", \"/usr/bin/seq\", \"/usr/bin/sha1sum\",\n"
    "      \"/usr/bin/sha224sum\", \"/usr/bin/sha256sum\", \"/usr/bin/sha384sum\",\n"
    "      \"/usr/bin/sha512sum\", \"/usr/bin/shred\", \"/usr/bin/shuf\", \"/usr/bin/sleep\",\n"
    "      \"/usr/bin/sort\", \"/usr/bin/split\", \"/usr/bin/stat\", \"/usr/bin/stdbuf\",\n"
    "      \"/usr/bin/sum\", \"/usr/bin/sync\", \"/usr/bin/tac\", \"/usr/bin/tail\",\n"
    "      \"/usr/bin/tee\", \"/usr/bin/test\", \"/usr/bin/timeout\", \"/usr/bin/touch\",\n"
    "      \"/usr/bin/tr\", \"/usr/bin/true\", \"/usr/bin/truncate\", \"/usr/bin/tsort\",\n"
    "      \"/usr/bin/tty\", \"/usr/bin/uname\", \"/usr/bin/unexpand\", \"/usr/bin/uniq\",\n"
    "      \"/usr/bin/unlink\", \"/usr/bin/vdir\", \"/usr/bin/wc\", \"/usr/bin/whoami\",\n"
    "      \"/usr/bin/yes\", \"/usr/bin/sh\", \"/usr/bin/dash\", \"/usr/bin/bash\",\n"
    "      \"/usr/bin/find\", \"/usr/bin/xargs\", \"/usr/bin/grep\", \"/usr/bin/egrep\",\n"
    "      \"/usr/bin/fgrep\", \"/usr/bin/sed\", \"/usr/bin/mawk\", \"/usr/bin/gawk\",\n"
    "      \"/usr/bin/awk\", \"/usr/bin/diff\", \"/usr/bin/diff3\", \"/usr/bin/cmp\",\n"
    "      \"/usr/bin/sdiff\", \"/usr/bin/patch\", \"/usr/bin/tar\", \"/usr/bin/gzip\",\n"
    "      \"/usr/bin/gunzip\", \"/usr/bin/zcat\", \"/usr/bin/xz\", \"/usr/bin/unxz\",\n"
    "      \"/usr/bin/xzcat\", \"/usr/bin/bzip2\", \"/usr/bin/bunzip2\", \"/usr/bin/bzcat\",\n"
    "      \"/usr/bin/gettext\", \"/usr/bin/ngettext\", \"/usr/bin/envsubst\",\n"
    "      \"/usr/bin/ldd\", \"/usr/bin/locale\", \"/usr/bin/getconf\", \"/usr/bin/which\",\n"
    "      \"/usr/bin/flock\", \"/usr/bin/fallocate\",\n"
    "      \"/usr/bin/zstd\", \"/usr/bin/unzstd\", \"/usr/bin/zstdcat\", \"/usr/bin/zip\",\n"
    "      \"/usr/bin/unzip\", \"/usr/bin/file\", \"/usr/bin/less\", \"/usr/bin/tput\",\n"
    "      \"/usr/bin/hostname\", \"/usr/bin/getent\", \"/usr/bin/ps\", \"/usr/bin/jq\",\n"
    "      \"/usr/bin/bc\", \"/usr/bin/sqlite3\", \"/usr/bin/perl\",\n"
    "      \"/usr/bin/pkg-config\", \"/usr/bin/pkgconf\", \"/usr/bin/cmake\",\n"
    "      \"/usr/bin/ctest\", \"/usr/bin/ninja\",\n"
    "      \"/usr/bin/git\", \"/usr/bin/python3\",\n"
    "      \"/usr/bin/make\", \"/usr/bin/cc\", \"/usr/bin/gcc\", \"/usr/bin/cpp\",\n"
    "      \"/usr/bin/c++\", \"/usr/bin/g++\", \"/usr/bin/as\", \"/usr/bin/ld\",\n"
    "      \"/usr/bin/ld.bfd\", \"/usr/bin/ld.gold\", \"/usr/bin/ar\", \"/usr/bin/ranlib\",\n"
    "      \"/usr/bin/nm\", \"/usr/bin/strip\", \"/usr/bin/objdump\", \"/usr/lib/gcc\",\n"
    "      \"/usr/libexec/gcc\", \"/usr/lib/git-core\" ];\n"
    "    ro_binds = [ ];\n"
    "    rw_binds = [ ];\n"
    "    limits = { memory = \"2G\"; processes = 256; open_files = 1024; file_size = \"1G\";\n"
    "      cpu = 600; wall = 3600; tmp_size = \"256M\"; };\n"
    "    requestable = ( { caps = [ \"fs.*:/**\", \"net.connect:*:*\", \"proc.exec:/**\" ];\n"
    "      approval = \"human\"; max_ttl = 3600; } );\n"
    "  };\n"
    "  high = {\n"
    "    ceiling = [ \"fs.*:/**\", \"net.connect:*:*\", \"proc.exec:/**\" ];\n"
    "    exec = [ ];\n"
    "    ro_binds = [ ];\n"
    "    rw_binds = [ ];\n"
    "    limits = { memory = \"8G\"; processes = 1024; open_files = 4096; file_size = \"8G\";\n"
    "      cpu = 3600; wall = 14400; tmp_size = \"1G\"; };\n"
    "    requestable = ( { caps = [ \"fs.*:/**\", \"net.connect:*:*\", \"proc.exec:/**\" ];\n"
    "      approval = \"human\"; max_ttl = 3600; } );\n"
    "  };\n"
    "};\n";
