/*
 * net_unix_bind_host.c - escape attempt: the broker's AF_UNIX sockets name nothing in the host's abstract namespace.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 * ARGS: @ABSTRACT@
 *
 * The broker's channel (CAPBROKER_FD) and the resolver's socket (a
 * connect() to 127.0.0.53:53 installs one end of a socketpair) are made
 * by the broker, so they belong to the host's network namespace, where
 * abstract names are looked up.  bind() is allowed in the medium and high
 * tiers (the agent's own sockets serve the sandbox), and an AF_UNIX
 * socketpair end has no address: before, bind() on either named an
 * abstract socket in the host's namespace (seen in the host's
 * /proc/net/unix): the agent could squat a host service's name before
 * that service started (X11's @/tmp/.X11-unix/X1, a daemon's control
 * socket) and learn which names the host uses (EADDRINUSE for the
 * host's, here the suite's listener @ABSTRACT@).  The broker binds its
 * sockets (an autobind) before handing them over: bind() is EINVAL.
 * Found by the red-team pass on the mediated channels.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/escape/escape.h"

static socklen_t
abstract(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "%s", name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

/* Every way to name fd in its namespace fails: it is already bound. */
static void
try_bind(int fd, const char *what, const char *host_name)
{
	struct sockaddr_un a;
	sa_family_t fam = AF_UNIX;
	char squat[64], msg[160];
	socklen_t l;

	snprintf(squat, sizeof(squat), "capbroker-escape-squat-%d", (int)getpid());
	l = abstract(&a, squat);
	snprintf(msg, sizeof(msg), "bind(%s, @%s)", what, squat);
	esc_errno(bind(fd, (struct sockaddr *)&a, l), msg, EINVAL, 0);
	/* EADDRINUSE here would tell the agent the host has that name. */
	l = abstract(&a, host_name);
	snprintf(msg, sizeof(msg), "bind(%s, @%s: the host's)", what, host_name);
	esc_errno(bind(fd, (struct sockaddr *)&a, l), msg, EINVAL, 0);
	/* An autobind of a bound socket is 0 and changes nothing (the
	 * kernel's unix_autobind); of an unbound one it names it. */
	{
		struct sockaddr_un b0, b1;
		socklen_t l0 = sizeof(b0), l1 = sizeof(b1);

		memset(&b0, 0, sizeof(b0));
		memset(&b1, 0, sizeof(b1));
		esc_true(getsockname(fd, (struct sockaddr *)&b0, &l0) == 0 &&
		    l0 > sizeof(sa_family_t), "the broker's socket is bound before the agent has it");
		if (bind(fd, (struct sockaddr *)&fam, sizeof(fam)) == 0) {
			snprintf(msg, sizeof(msg), "autobind(%s) named it anew", what);
			esc_true(getsockname(fd, (struct sockaddr *)&b1, &l1) == 0 && l1 == l0 &&
			    memcmp(&b0, &b1, l0) == 0, msg);
		} else if (errno != EINVAL) {
			esc_escaped("autobind(%s) failed with %s, expected 0 or EINVAL", what,
			    strerror(errno));
		}
	}
}

int
main(int argc, char **argv)
{
	const char *env = getenv("CAPBROKER_FD");
	struct sockaddr_in dns = { .sin_family = AF_INET, .sin_port = htons(53) };
	int chan, s;

	if (argc < 2 || !env)
		return 2;
	chan = atoi(env);
	try_bind(chan, "CAPBROKER_FD", argv[1]);
	/* the resolver's socketpair end, installed at the agent's socket */
	inet_pton(AF_INET, "127.0.0.53", &dns.sin_addr);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&dns, sizeof(dns)) != 0) {
		esc_escaped("connect to the resolver 127.0.0.53:53: %s", strerror(errno));
	} else {
		int dom = 0;
		socklen_t l = sizeof(dom);

		esc_true(getsockopt(s, SOL_SOCKET, SO_DOMAIN, &dom, &l) == 0 && dom == AF_UNIX,
		    "the resolver's socket is the broker's AF_UNIX socketpair end");
		try_bind(s, "the resolver's socket", argv[1]);
	}
	return esc_done("the broker's AF_UNIX sockets (channel, resolver) are bound already: "
	    "no abstract name in the host's namespace (EINVAL)");
}
