/*
 * common.c - error messages and clocks shared by every module.
 */
#include "common.h"

#include <time.h>

struct cb_errinfo {
	int code;
	const char *name;
	const char *msg;
};

static const struct cb_errinfo cb_errs[] = {
	{ CB_OK, "ok", "success" },
	{ CB_ENOMEM, "no-memory", "out of memory" },
	{ CB_EINVAL, "invalid", "invalid argument" },
	{ CB_EIO, "io", "input/output error" },
	{ CB_EPERM, "permission", "permission denied" },
	{ CB_ENOENT, "not-found", "no such file or object" },
	{ CB_EEXIST, "exists", "already exists" },
	{ CB_ETOOBIG, "too-big", "input exceeds the hard size limit" },
	{ CB_EINTERNAL, "internal", "internal error" },
	{ CB_EBUSY, "busy", "too many requests in flight" },
	{ CB_ETIMEDOUT, "timed-out", "operation timed out" },
	{ CB_EUNSUPPORTED, "unsupported", "not supported" },
	{ CB_ETOK_PREFIX, "token-prefix", "token does not start with cap1." },
	{ CB_ETOK_BASE64, "token-base64", "token is not valid unpadded base64url" },
	{ CB_ETOK_TOOBIG, "token-too-big", "token exceeds the maximum size" },
	{ CB_ETOK_VERSION, "token-version", "unknown token version" },
	{ CB_ETOK_MISSING, "token-missing-field", "token lacks a required field" },
	{ CB_ETOK_TYPE, "token-field-type", "token field has the wrong type or size" },
	{ CB_ETOK_DUPKEY, "token-duplicate-field", "token has a duplicate field" },
	{ CB_ETOK_TRAILING, "token-trailing-bytes", "token has trailing bytes" },
	{ CB_ETOK_UNKNOWN, "token-unknown-field", "token has an unknown field" },
	{ CB_ETOK_MALFORMED, "token-malformed", "token body is malformed or truncated" },
	{ CB_EBADSIG, "bad-signature", "bad signature" },
	{ CB_EUNKNOWNKEY, "unknown-key", "unknown key id" },
	{ CB_EEXPIRED, "expired", "token expired" },
	{ CB_ENOTYET, "not-yet-valid", "token not yet valid" },
	{ CB_EAUDIENCE, "wrong-audience", "token bound to another sandbox" },
	{ CB_EREVOKED, "revoked", "token revoked" },
	{ CB_ESPENT, "uses-spent", "token use limit spent" },
	{ CB_ENOTCOVERED, "not-covered", "not covered by the token" },
	{ CB_EPOLICY, "exceeds-policy", "exceeds policy" },
	{ CB_ENOTOKEN, "no-token", "no token covers the request" },
	{ CB_ENARROW, "widens-parent", "derived token would exceed its parent" },
	{ CB_ERETIRED, "key-retired", "signing key retired" },
	{ CB_EUNKNOWNTOK, "unknown-token", "token unknown to this broker" },
	{ CB_ECAP_OP, "cap-op", "unknown capability operation" },
	{ CB_ECAP_SYNTAX, "cap-syntax", "capability is not OP:RESOURCE" },
	{ CB_ECAP_RELATIVE, "cap-relative", "path is not absolute" },
	{ CB_ECAP_DOTDOT, "cap-dotdot", "path has a . or .. component" },
	{ CB_ECAP_EMPTY, "cap-empty-component", "path has an empty component" },
	{ CB_ECAP_NUL, "cap-control-char", "capability or path has a control or bidi character" },
	{ CB_ECAP_HOST, "cap-host", "malformed host, address or CIDR" },
	{ CB_ECAP_PORT, "cap-port", "malformed port" },
	{ CB_ECAP_GLOB, "cap-glob", "malformed glob" },
	{ CB_ECAP_TOOLONG, "cap-too-long", "capability too long" },
	{ CB_EKEY_MODE, "key-mode", "key file is accessible to other users" },
	{ CB_EKEY_FORMAT, "key-format", "key file is malformed" },
	{ CB_EPROTO, "protocol", "malformed message" },
	{ CB_EUNKNOWNOP, "unknown-op", "unknown request" },
	{ CB_EAUDIT, "audit-failed", "audit log cannot be written" },
	{ CB_EESCAPE, "escape", "path would escape its root" },
	{ CB_EFTYPE, "file-type", "refused file type" },
	{ CB_ENETBLOCKED, "never-reachable", "address is in a never-reachable range" },
	{ CB_EDENIED, "denied", "denied" },
	{ CB_EEXPIREDREQ, "request-expired", "request expired undecided" },
	{ CB_ECONNREFUSED, "connection-refused", "connection refused" },
	{ CB_ERESOLVE, "resolve-failed", "name did not resolve" },
	{ CB_ERATE, "rate-limited", "too many requests" },
	{ CB_ECLOSED, "closed", "channel closed" },
	{ CB_ECLUSTER, "cluster-stale", "the cluster database is unreachable (fail closed)" },
	{ CB_ESTOPPING, "stopping", "the sandbox is stopping" },
};

static const struct cb_errinfo *
cb_errlookup(int err)
{
	for (size_t i = 0; i < sizeof(cb_errs) / sizeof(cb_errs[0]); i++)
		if (cb_errs[i].code == err)
			return &cb_errs[i];
	return NULL;
}

const char *
cb_strerror(int err)
{
	const struct cb_errinfo *e = cb_errlookup(err);

	return e ? e->msg : "unknown error";
}

const char *
cb_errname(int err)
{
	const struct cb_errinfo *e = cb_errlookup(err);

	return e ? e->name : "unknown";
}

uint64_t
cb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

uint64_t
cb_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

