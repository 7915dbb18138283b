# client/ - the agent-side client library (cc_), capcall, and the man page.
# capctl (client/capctl.c) is the lead's and is not part of libclient.
MODULES += client
client_SRCS := client/conn.c client/ops.c client/mcp.c client/mcp_tools.c
client_LIBS := client wire caps common

PROGS += capcall
capcall_SRCS := client/capcall.c
capcall_LIBS := client cli wire caps common

MAN1 += docs/man/capcall.1
