/*
 * default.c - the built-in policy, used when no policy file is given and as
 * the base every policy file is applied over.  Trust domain: the broker.
 *
 * It is the contract's tier table with safe limits: low gets only a few
 * read-only tools, medium its workspace, high everything; any capability may
 * be requested at run time, a human approving it, for at most an hour.
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
    "  audit_throttle_max = 30;\n"
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
    "    exec = [ ];\n"
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
