/*
 * mcp.h - `capcall mcp`: a Model Context Protocol server on stdin/stdout
 * whose every tool call is one broker operation (see docs/mcp.md).
 *
 * Agent side: runs inside the sandbox, as capcall, holding nothing but the
 * sandbox's broker channel.  Everything the MCP client sends is hostile
 * input: it is decoded once, in cc_mcp_handle(), with hard bounds on line
 * length, nesting depth and every string, and no input can make the server
 * exit or send the broker anything but a well-formed request.
 *
 * Split: mcp.c frames and decodes JSON-RPC, dispatches methods and runs the
 * loop; mcp_tools.c holds the tools (their schemas, descriptions built from
 * the held tokens, and the broker calls).
 */
#ifndef CB_MCP_H
#define CB_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cli/cli.h"
#include "client/capclient.h"

#define CC_MCP_LINE_MAX		(4u * 1024 * 1024)	/* one JSON-RPC message */
#define CC_MCP_DEPTH_MAX	32			/* nesting of arrays and objects */
#define CC_MCP_CONTENT_MAX	(1024u * 1024)		/* file content in or out */
#define CC_MCP_NET_MAX		(1024u * 1024)		/* connect: bytes kept */
#define CC_MCP_NET_DEFAULT	(64u * 1024)
#define CC_MCP_NET_WAIT_MS	10000			/* connect: wait for the peer */
#define CC_MCP_PATH_MAX		4096
#define CC_MCP_REASON_MAX	1024
#define CC_MCP_POLL_MS		1000			/* token check period */
#define CC_MCP_PENDING_MAX	8			/* requests waiting for a human */

struct cc_mcp;

/* A server speaking for connection c (which it does not own; NULL: no
 * broker, every tool call fails "broker unavailable", as the fuzz target
 * and the unit tests use it).  CB_ENOMEM. */
int cc_mcp_new(struct cc_conn *c, struct cc_mcp **out) CB_WARN_UNUSED;
void cc_mcp_free(struct cc_mcp *m);

/*
 * Handle one message (a line without its newline, len bytes, not
 * NUL-terminated).  *reply is the line to send back (malloc'd, no newline;
 * the caller frees it), or NULL when nothing is to be sent (a notification,
 * a response, an empty line).  0, or CB_ENOMEM when even the error reply
 * could not be built.
 */
int cc_mcp_handle(struct cc_mcp *m, const char *line, size_t len, char **reply) CB_WARN_UNUSED;

/* The reply for a line longer than CC_MCP_LINE_MAX (which was discarded). */
char *cc_mcp_too_long(void);

/*
 * Re-read the held tokens; true when what they allow has changed since the
 * last look (a token granted, derived, approved, revoked, expired or spent)
 * and the client has said it is initialized, i.e. when a
 * notifications/tools/list_changed is due.
 */
bool cc_mcp_tokens_changed(struct cc_mcp *m);

/* The notification line (malloc'd, no newline). */
char *cc_mcp_list_changed(void);

/* While request_capability calls wait for a human: the broker channel to
 * poll() for their answers (else -1). */
int cc_mcp_wait_fd(const struct cc_mcp *m);

/* The reply line (malloc'd) for the next request_capability that has been
 * decided (or can no longer be), or NULL when none has. */
char *cc_mcp_next_done(struct cc_mcp *m);

/* `capcall mcp [--poll-ms N]`: the server loop.  Returns the exit status. */
int cc_mcp_main(int argc, char **argv);

/* ---- between mcp.c and mcp_tools.c ------------------------------------- */

/* A request_capability sent to the broker, its answer still to come. */
struct cc_mcp_pending {
	uint32_t wid;		/* the broker request's id */
	json_t *id;		/* the JSON-RPC request's id */
	char *cap;
};

struct cc_mcp {
	struct cc_conn *c;
	bool initialized;	/* notifications/initialized seen */
	bool dirty;		/* a tool call may have changed the tokens */
	char *tokens_seen;	/* what the usable tokens allowed at the last look */
	json_t *cur_id;		/* id of the request being handled (borrowed) */
	bool deferred;		/* its answer comes later (cc_mcp_next_done) */
	struct cc_mcp_pending pending[CC_MCP_PENDING_MAX];
	size_t npending;
};

/* The tools array for tools/list (new reference, or NULL: ENOMEM). */
json_t *cc_mcp_tools_list(struct cc_mcp *m);

/*
 * Run tool name with args (an object).  Returns the CallToolResult (new
 * reference), or NULL with *bad set when no tool has that name (a JSON-RPC
 * error), or NULL without *bad on ENOMEM.
 */
json_t *cc_mcp_tool_call(struct cc_mcp *m, const char *name, json_t *args, bool *bad);

/* The CallToolResult of pending request p, whose answer has arrived (or
 * whose channel broke); new reference, NULL on ENOMEM. */
json_t *cc_mcp_request_result(struct cc_mcp *m, const struct cc_mcp_pending *p);

#endif
