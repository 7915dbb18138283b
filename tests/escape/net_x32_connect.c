/*
 * net_x32_connect.c - escape attempt: connect() by its x32 number, past the x86-64 filter's connect rule (SIGSYS, exit 159).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 159
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * An x32 call has the x86-64 architecture and the number with bit 30 set
 * (0x40000000 | 42 for connect): a filter that compared the number alone
 * would not see connect(), and the call would run with the agent's own
 * address.  The filter kills the process for any x32 number (SIGSYS), in
 * the tier with mediated connect() too.  The address is 127.0.0.2 (not
 * covered).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
#if defined(__x86_64__)
	struct sockaddr_in a = { .sin_family = AF_INET };
	long r;
	int s;

	if (argc < 2 || (s = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return 2;
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(0x7f000002);
	r = syscall(0x40000000L | SYS_connect, s, &a, sizeof(a));
	esc_escaped("the x32 connect returned %ld (%s)", r, r < 0 ? strerror(errno) : "connected");
	return 1;
#else
	(void)argc;
	(void)argv;
	raise(SIGSYS);
	return 1;
#endif
}
