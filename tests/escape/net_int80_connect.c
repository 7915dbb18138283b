/*
 * net_int80_connect.c - escape attempt: connect() through the i386 connect (362), past the x86-64 filter's connect rule (SIGSYS, exit 159).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 159
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * The notifier hears x86-64 connect() (42) only.  The same call made
 * through the 32-bit entry point (int 0x80) has other numbers, which the
 * filter's rules do not name: it must never run, nor reach the default
 * action (ENOSYS would still be a refusal, but a rule for an i386 number
 * could be an allow).  The filter checks the architecture first and kills
 * the process (SIGSYS), even in the tier with mediated connect().  The
 * address is 127.0.0.2 (not covered); its memory is below 4 GiB so the
 * 32-bit call could read it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
#if defined(__x86_64__)
	struct sockaddr_in *a;
	unsigned *args;
	long ret;
	int s;

	if (argc < 2)
		return 2;
	a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (a == MAP_FAILED || (s = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return 2;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(argv[1]));
	a->sin_addr.s_addr = htonl(0x7f000002);
	args = (unsigned *)(a + 1);
	args[0] = (unsigned)s;
	args[1] = (unsigned)(unsigned long)a;
	args[2] = sizeof(*a);
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(362L), "b"((long)s), "c"((long)(unsigned long)a),
	    "d"((long)sizeof(*a)) : "memory");
	esc_escaped("the 32-bit call returned %ld", ret);
	return 1;
#else
	(void)argc;
	(void)argv;
	raise(SIGSYS);
	return 1;
#endif
}
