/*
 * test_admin.c - the admin client (client/admin.c) against a fake broker
 * in this process: what each connection failure says and maps to, replies
 * picked by id among events, descriptors taken or closed, a refusal, a
 * hang-up, a malformed reply.  Test code (trusted).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/admin.h"
#include "common/common.h"
#include "tests/tap.h"

static char dir[] = "/tmp/test_admin.XXXXXX";
static char path[256];
static int lfd = -1;

static int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static int
listen_at(const char *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 4) != 0)
		abort();
	return fd;
}

/* A connected client and the fake broker's end of it. */
static struct cc_adm *
client(int *srv)
{
	struct cc_adm *a = NULL;

	if (cc_adm_new(&a) != 0 || cc_adm_connect(a, path) != CC_ADM_OK)
		abort();
	if ((*srv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		abort();
	return a;
}

/* The broker's side: one packet with id (none if < 0), ok, and nfds
 * copies of stdin's descriptor attached. */
static void
reply(int srv, int64_t id, bool ok, int err, const char *reason, int nfds)
{
	uint8_t buf[512];
	struct wire_enc e;
	size_t len;
	union {
		char c[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[4] = { 0, 0, 0, 0 };

	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	if (id >= 0)
		wire_put_u64(&e, "id", (uint64_t)id);
	else
		wire_put_str(&e, "event", "request");
	wire_put_bool(&e, "ok", ok);
	if (err) {
		wire_put_i64(&e, "err", err);
		wire_put_str(&e, "name", cb_errname(err));
	}
	if (reason)
		wire_put_str(&e, "reason", reason);
	wire_map_end(&e);
	if (wire_enc_finish(&e, &len) != 0)
		abort();
	iov.iov_len = len;
	if (nfds > 0) {
		mh.msg_control = u.c;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
		CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
		CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), fds, (size_t)nfds * sizeof(int));
	}
	if (sendmsg(srv, &mh, 0) < 0)
		abort();
}

/* kill: a command whose ok reply carries nothing of its own. */
static int
call(struct cc_adm *a, struct wire_adm_rep *m, int *fds, size_t nfds)
{
	struct wire_adm_req rq;

	cc_adm_begin(a, &rq, WIRE_ADM_KILL);
	return cc_adm_call(a, &rq, m, fds, nfds);
}

static void
test_connect_failures(void)
{
	struct cc_adm *a = NULL;
	char stale[300], lng[200];
	int fd;

	if (cc_adm_new(&a) != 0)
		abort();
	snprintf(stale, sizeof(stale), "%s/none.sock", dir);
	T_OK(cc_adm_connect(a, stale) == CC_ADM_UNAVAIL && strstr(cc_adm_why(a), "no such socket"),
	    "no socket: unavailable, saying so");
	snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
	fd = listen_at(stale);
	close(fd);
	T_OK(cc_adm_connect(a, stale) == CC_ADM_UNAVAIL &&
	    strstr(cc_adm_why(a), "the socket is stale"), "a stale socket: unavailable, named stale");
	memset(lng, 'x', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	T_OK(cc_adm_connect(a, lng) == CC_ADM_USAGE && strstr(cc_adm_why(a), "too long"),
	    "a path longer than sun_path: a usage error");
	cc_adm_free(a);
}

static void
test_replies(void)
{
	struct wire_adm_rep m;
	struct cc_adm *a;
	int srv, fds[3], before;
	bool all;

	a = client(&srv);
	before = open_fds();
	reply(srv, -1, true, 0, NULL, 2);	/* an event, with fds nobody asked for */
	reply(srv, 7, true, 0, NULL, 1);	/* another request's reply */
	reply(srv, 1, true, 0, NULL, 0);
	T_OK(call(a, &m, NULL, 0) == CC_ADM_OK && cc_adm_id(a) == 1,
	    "the reply to our id is found among an event and another id");
	T_OK(open_fds() == before, "... and the descriptors they carried are closed");
	reply(srv, 2, true, 0, NULL, 4);
	T_OK(call(a, &m, fds, 3) == CC_ADM_OK, "a reply carrying four descriptors");
	all = fds[0] > 2 && fds[1] > 2 && fds[2] > 2;
	T_OK(all && open_fds() == before + 3, "... three taken, the fourth closed");
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	reply(srv, 3, false, CB_EUNKNOWNTOK, "no such token", 1);
	T_OK(call(a, &m, fds, 1) == CC_ADM_UNKNOWN && cc_adm_refused(a) &&
	    strcmp(cc_adm_why(a), "no such token") == 0, "a refusal: its exit status and reason");
	T_OK(fds[0] == -1 && open_fds() == before, "... and a refusal's descriptor is closed");
	T_OK(send(srv, "\xc1junk", 5, 0) == 5 && call(a, &m, NULL, 0) == CC_ADM_PROTO &&
	    !cc_adm_refused(a), "a malformed reply: protocol error");
	close(srv);
	T_OK(call(a, &m, NULL, 0) == CC_ADM_UNAVAIL &&
	    strcmp(cc_adm_why(a), "the broker closed the connection") == 0,
	    "a broker that answered before and hangs up: unavailable");
	cc_adm_free(a);

	a = client(&srv);
	reply(srv, 0, false, CB_EBUSY, "too many connections", 0);
	T_OK(call(a, &m, NULL, 0) == CC_ADM_UNAVAIL &&
	    strstr(cc_adm_why(a), "refused the connection: too many connections"),
	    "id 0 refusal: the broker turned the connection away, saying why");
	close(srv);
	cc_adm_free(a);

	a = client(&srv);
	close(srv);
	T_OK(call(a, &m, NULL, 0) == CC_ADM_PERM && strstr(cc_adm_why(a), "administrators"),
	    "a hang-up without any reply: not an administrator (permission)");
	cc_adm_free(a);
}

int
main(void)
{
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/admin.sock", dir);
	lfd = listen_at(path);
	test_connect_failures();
	test_replies();
	T_OK(cc_adm_exit_for(CB_ECAP_OP) == CC_ADM_BADCAP && cc_adm_exit_for(CB_EPOLICY) ==
	    CC_ADM_POLICY && cc_adm_exit_for(CB_EINVAL) == CC_ADM_USAGE &&
	    cc_adm_exit_for(CB_EIO) == CC_ADM_FAIL, "broker codes map to capctl's exit statuses");
	close(lfd);
	unlink(path);
	{
		char p[300];

		snprintf(p, sizeof(p), "%s/stale.sock", dir);
		unlink(p);
	}
	rmdir(dir);
	return t_done();
}
