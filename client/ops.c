/*
 * ops.c - one synchronous call per broker operation.
 *
 * Agent side (inside the sandbox).  Each call builds a wire request, waits
 * for its reply through cc_call() and copies the results the caller keeps
 * into one allocation of its own, so nothing returned points into the
 * connection's buffers.
 */
#include "client/cc_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A copy of the reply's token text and id, as one allocation. */
static int
cc_grant_new(const struct wire_reply *rep, struct cc_grant **out)
{
	const char *tok = rep->token ? rep->token : "", *tid = rep->tid ? rep->tid : "";
	size_t lt = strlen(tok) + 1, li = strlen(tid) + 1;
	struct cc_grant *g;
	char *p;

	if (!(g = calloc(1, sizeof(*g) + lt + li)))
		return CB_ENOMEM;
	p = (char *)(g + 1);
	memcpy(p, tok, lt);
	g->token = p;
	memcpy(p + lt, tid, li);
	g->tid = p + lt;
	g->has_th = rep->has_th;
	g->th = rep->th;
	*out = g;
	return 0;
}

void
cc_grant_free(struct cc_grant *g)
{
	free(g);
}

static int
cc_need(struct cc_conn *c, bool cond, const char *what)
{
	return cond ? 0 : cc_fail(c, CB_EINVAL, what);
}

int
cc_ping(struct cc_conn *c)
{
	struct wire_req r = { .op = WIRE_OP_PING };
	struct wire_reply rep;

	return cc_call(c, &r, &rep, NULL);
}

int
cc_fs_read(struct cc_conn *c, const char *path, int *fd)
{
	struct wire_req r = { .op = WIRE_OP_FS_READ, .path = path };
	struct wire_reply rep;

	*fd = -1;
	if (cc_need(c, path != NULL, "no path") != 0)
		return CB_EINVAL;
	return cc_call(c, &r, &rep, fd);
}

int
cc_fs_write(struct cc_conn *c, const char *path, unsigned flags, unsigned mode, int *fd)
{
	struct wire_req r = { .op = WIRE_OP_FS_WRITE, .path = path, .flags = flags, .mode = mode };
	struct wire_reply rep;

	*fd = -1;
	if (cc_need(c, path && !(flags & ~(CC_F_CREATE | CC_F_TRUNC | CC_F_APPEND | CC_F_EXCL)),
	    "bad path or flags") != 0)
		return CB_EINVAL;
	return cc_call(c, &r, &rep, fd);
}

int
cc_fs_write_data(struct cc_conn *c, const char *path, unsigned flags, unsigned mode,
    const void *data, size_t len, size_t *n)
{
	struct wire_req r = { .op = WIRE_OP_FS_WRITE, .path = path, .flags = flags, .mode = mode,
		.has_data = true, .data = data, .data_len = len };
	struct wire_reply rep;
	int err;

	if (n)
		*n = 0;
	if (cc_need(c, path && (data || len == 0) &&
	    !(flags & ~(CC_F_CREATE | CC_F_TRUNC | CC_F_APPEND | CC_F_EXCL)),
	    "bad path, data or flags") != 0)
		return CB_EINVAL;
	if (len > CC_DATA_MAX)
		return cc_fail(c, CB_ETOOBIG, "more data than one request may carry");
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.has_n || rep.n > len)
		return cc_fail(c, CB_EPROTO, "reply lacks a valid byte count");
	if (n)
		*n = (size_t)rep.n;
	return 0;
}

static int
cc_open_handle(struct cc_conn *c, enum wire_op op, const char *path, unsigned flags,
    unsigned mode, uint32_t *h)
{
	struct wire_req r = { .op = op, .path = path, .flags = flags | WIRE_F_MEDIATED, .mode = mode };
	struct wire_reply rep;
	int err;

	*h = 0;
	if (cc_need(c, path && !(flags & ~(CC_F_CREATE | CC_F_TRUNC | CC_F_APPEND | CC_F_EXCL)),
	    "bad path or flags") != 0)
		return CB_EINVAL;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.has_h)
		return cc_fail(c, CB_EPROTO, "reply lacks a handle");
	*h = rep.h;
	return 0;
}

int
cc_fs_read_handle(struct cc_conn *c, const char *path, uint32_t *h)
{
	return cc_open_handle(c, WIRE_OP_FS_READ, path, 0, 0, h);
}

int
cc_fs_write_handle(struct cc_conn *c, const char *path, unsigned flags, unsigned mode, uint32_t *h)
{
	return cc_open_handle(c, WIRE_OP_FS_WRITE, path, flags, mode, h);
}

int
cc_io_read(struct cc_conn *c, uint32_t h, void *buf, size_t len, size_t *got)
{
	struct wire_req r = { .op = WIRE_OP_IO_READ, .h = h };
	struct wire_reply rep;
	int err;

	*got = 0;
	if (len > CC_DATA_MAX)
		len = CC_DATA_MAX;
	if (cc_need(c, buf && len > 0, "no buffer") != 0)
		return CB_EINVAL;
	r.len = (uint32_t)len;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	/* More than we asked for would overrun the caller's buffer. */
	if (!rep.has_data || rep.data_len > len)
		return cc_fail(c, CB_EPROTO, "reply lacks data or carries too much");
	if (rep.data_len)
		memcpy(buf, rep.data, rep.data_len);
	*got = rep.data_len;
	return 0;
}

int
cc_io_write(struct cc_conn *c, uint32_t h, const void *buf, size_t len, size_t *n)
{
	struct wire_req r = { .op = WIRE_OP_IO_WRITE, .h = h, .has_data = true,
		.data = buf, .data_len = len };
	struct wire_reply rep;
	int err;

	if (n)
		*n = 0;
	if (cc_need(c, buf || len == 0, "no buffer") != 0)
		return CB_EINVAL;
	if (len > CC_DATA_MAX)
		return cc_fail(c, CB_ETOOBIG, "more data than one request may carry");
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.has_n || rep.n > len)
		return cc_fail(c, CB_EPROTO, "reply lacks a valid byte count");
	if (n)
		*n = (size_t)rep.n;
	return 0;
}

int
cc_io_close(struct cc_conn *c, uint32_t h)
{
	struct wire_req r = { .op = WIRE_OP_IO_CLOSE, .h = h };
	struct wire_reply rep;

	return cc_call(c, &r, &rep, NULL);
}

int
cc_fs_list(struct cc_conn *c, const char *path, struct cc_dir **out)
{
	struct wire_req r = { .op = WIRE_OP_FS_LIST, .path = path };
	struct wire_reply rep;
	struct cc_dir *d;
	size_t names = 0;
	char *p;
	int err;

	*out = NULL;
	if (cc_need(c, path != NULL, "no path") != 0)
		return CB_EINVAL;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	/* Each name is bounded by the reply size, so the sum cannot overflow. */
	for (size_t i = 0; i < rep.nentries; i++)
		names += strlen(rep.entries[i].name) + 1;
	if (!(d = calloc(1, sizeof(*d) + rep.nentries * sizeof(*d->ents) + names)))
		return cc_fail(c, CB_ENOMEM, NULL);
	d->n = rep.nentries;
	d->trunc = rep.trunc;
	d->ents = (struct cc_dirent *)(d + 1);
	p = (char *)(d->ents + d->n);
	for (size_t i = 0; i < d->n; i++) {
		size_t l = strlen(rep.entries[i].name) + 1;

		memcpy(p, rep.entries[i].name, l);
		d->ents[i].name = p;
		d->ents[i].type = rep.entries[i].type;
		p += l;
	}
	*out = d;
	return 0;
}

void
cc_dir_free(struct cc_dir *d)
{
	free(d);
}

int
cc_fs_stat(struct cc_conn *c, const char *path, struct cc_stat *st)
{
	struct wire_req r = { .op = WIRE_OP_FS_STAT, .path = path };
	struct wire_reply rep;
	int err;

	memset(st, 0, sizeof(*st));
	if (cc_need(c, path != NULL, "no path") != 0)
		return CB_EINVAL;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.has_stat)
		return cc_fail(c, CB_EPROTO, "reply lacks the file's status");
	st->size = rep.stat_size;
	st->mtime = rep.stat_mtime;
	st->mode = rep.stat_mode;
	st->type = rep.stat_type;
	return 0;
}

static int
cc_path_op(struct cc_conn *c, enum wire_op op, const char *path, const char *path2, unsigned mode)
{
	struct wire_req r = { .op = op, .path = path, .path2 = path2, .mode = mode };
	struct wire_reply rep;

	if (cc_need(c, path && (op != WIRE_OP_FS_RENAME || path2), "no path") != 0)
		return CB_EINVAL;
	return cc_call(c, &r, &rep, NULL);
}

int
cc_fs_mkdir(struct cc_conn *c, const char *path, unsigned mode)
{
	return cc_path_op(c, WIRE_OP_FS_MKDIR, path, NULL, mode);
}

int
cc_fs_delete(struct cc_conn *c, const char *path)
{
	return cc_path_op(c, WIRE_OP_FS_DELETE, path, NULL, 0);
}

int
cc_fs_rename(struct cc_conn *c, const char *from, const char *to)
{
	return cc_path_op(c, WIRE_OP_FS_RENAME, from, to, 0);
}

int
cc_net_connect(struct cc_conn *c, const char *host, uint16_t port, unsigned timeout_ms, int *fd)
{
	struct wire_req r = { .op = WIRE_OP_NET_CONNECT, .host = host, .port = port,
		.timeout_ms = timeout_ms };
	struct wire_reply rep;

	*fd = -1;
	if (cc_need(c, host && *host && port != 0, "no host or port") != 0)
		return CB_EINVAL;
	return cc_call(c, &r, &rep, fd);
}

int
cc_proc_exec(struct cc_conn *c, const char *const *argv, unsigned timeout_ms, struct cc_exec **out)
{
	return cc_proc_exec_in(c, argv, timeout_ms, NULL, 0, out);
}

int
cc_proc_exec_in(struct cc_conn *c, const char *const *argv, unsigned timeout_ms,
    const void *in, size_t len, struct cc_exec **out)
{
	struct wire_req r = { .op = WIRE_OP_PROC_EXEC, .timeout_ms = timeout_ms,
		.has_data = len > 0, .data = in, .data_len = len };
	struct wire_reply rep;
	struct cc_exec *x;
	uint8_t *p;
	int err;

	*out = NULL;
	if (cc_need(c, argv && argv[0] && (in || len == 0), "no program or no input") != 0)
		return CB_EINVAL;
	if (len > CC_DATA_MAX)
		return cc_fail(c, CB_ETOOBIG, "more input than one request may carry");
	for (r.argc = 0; argv[r.argc]; r.argc++) {
		if (r.argc == WIRE_ARGV_MAX)
			return cc_fail(c, CB_ETOOBIG, "more arguments than the protocol allows");
		r.argv[r.argc] = argv[r.argc];
	}
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.has_status)
		return cc_fail(c, CB_EPROTO, "reply lacks the exit status");
	if (!(x = calloc(1, sizeof(*x) + rep.out_len + 1 + rep.errout_len + 1)))
		return cc_fail(c, CB_ENOMEM, NULL);
	x->status = rep.status;
	x->trunc = rep.trunc;
	p = (uint8_t *)(x + 1);
	if (rep.out_len)
		memcpy(p, rep.out, rep.out_len);
	x->out = p;
	x->out_len = rep.out_len;
	p += rep.out_len + 1;
	if (rep.errout_len)
		memcpy(p, rep.errout, rep.errout_len);
	x->err = p;
	x->err_len = rep.errout_len;
	*out = x;
	return 0;
}

void
cc_exec_free(struct cc_exec *x)
{
	free(x);
}

int
cc_request(struct cc_conn *c, const char *cap, uint64_t ttl, const char *reason,
    struct cc_grant **out)
{
	struct wire_req r = { .op = WIRE_OP_REQUEST, .cap = cap, .ttl = ttl, .reason = reason };
	struct wire_reply rep;
	int err;

	*out = NULL;
	if (cc_need(c, cap && *cap, "no capability") != 0)
		return CB_EINVAL;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.token && !rep.tid)
		return cc_fail(c, CB_EPROTO, "approval lacks the new token");
	if ((err = cc_grant_new(&rep, out)) != 0)
		return cc_fail(c, err, NULL);
	return 0;
}

int
cc_tokens(struct cc_conn *c, struct cc_toklist **out)
{
	struct wire_req r = { .op = WIRE_OP_TOKENS };
	struct wire_reply rep;
	struct cc_toklist *l;
	size_t strs = 0;
	char *p;
	int err;

	*out = NULL;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	for (size_t i = 0; i < rep.ntokens; i++)
		strs += strlen(rep.tokens[i].id) + 1 + strlen(rep.tokens[i].caps) + 1;
	if (!(l = calloc(1, sizeof(*l) + rep.ntokens * sizeof(*l->toks) + strs)))
		return cc_fail(c, CB_ENOMEM, NULL);
	l->n = rep.ntokens;
	l->toks = (struct cc_tokinfo *)(l + 1);
	p = (char *)(l->toks + l->n);
	for (size_t i = 0; i < l->n; i++) {
		const struct wire_tokinfo *ti = &rep.tokens[i];
		struct cc_tokinfo *to = &l->toks[i];
		size_t a = strlen(ti->id) + 1, b = strlen(ti->caps) + 1;

		to->th = ti->th;
		to->exp = ti->exp;
		to->has_uses = ti->has_uses;
		to->uses = ti->uses;
		to->elevated = ti->elevated;
		to->state = ti->state;
		memcpy(p, ti->id, a);
		to->id = p;
		memcpy(p + a, ti->caps, b);
		to->caps = p + a;
		p += a + b;
	}
	*out = l;
	return 0;
}

void
cc_toklist_free(struct cc_toklist *l)
{
	free(l);
}

int
cc_token_add(struct cc_conn *c, const char *token, uint32_t *th)
{
	struct wire_req r = { .op = WIRE_OP_TOKEN_ADD, .tok = token };
	struct wire_reply rep;
	int err;

	*th = 0;
	if (cc_need(c, token && *token, "no token") != 0)
		return CB_EINVAL;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.has_th)
		return cc_fail(c, CB_EPROTO, "reply lacks the token handle");
	*th = rep.th;
	return 0;
}

int
cc_token_derive(struct cc_conn *c, const struct cc_derive *d, struct cc_grant **out)
{
	struct wire_req r = { .op = WIRE_OP_DERIVE };
	struct wire_reply rep;
	int err;

	*out = NULL;
	if (cc_need(c, d && d->caps && d->ncaps > 0, "no capabilities") != 0)
		return CB_EINVAL;
	if (d->ncaps > WIRE_CAPS_MAX)
		return cc_fail(c, CB_ETOOBIG, "more capabilities than a token may carry");
	for (size_t i = 0; i < d->ncaps; i++)
		r.caps[i] = d->caps[i];
	r.ncaps = d->ncaps;
	r.ttl = d->ttl;
	r.has_uses = d->has_uses;
	r.uses = d->uses;
	r.aud = d->aud;
	if ((err = cc_call(c, &r, &rep, NULL)) != 0)
		return err;
	if (!rep.token)
		return cc_fail(c, CB_EPROTO, "reply lacks the new token");
	if ((err = cc_grant_new(&rep, out)) != 0)
		return cc_fail(c, err, NULL);
	return 0;
}
