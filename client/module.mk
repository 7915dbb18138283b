# client/ - the agent-side client library (cc_), capcall, and the man page.
# libcapclient is conn.c and ops.c only: it needs msgpack (through wire/),
# never jansson.
MODULES += client
client_SRCS := client/conn.c client/ops.c
client_LIBS := client wire common

# `capcall mcp` (cc_mcp_): the MCP server, on jansson through cli/.  Part of
# capcall, not of the client library.
MODULES += mcp
mcp_SRCS := client/mcp.c client/mcp_tools.c
mcp_LIBS := mcp client cli wire common

# The admin client (cc_adm_): capctl's and `capbroker run --connect`'s
# connection to a broker's admin socket.  Not part of the client library.
MODULES += admin
admin_SRCS := client/admin.c
admin_LIBS := admin wire common

PROGS += capcall
capcall_SRCS := client/capcall.c
capcall_LIBS := mcp client cli wire common

MAN1 += docs/man/capcall.1
