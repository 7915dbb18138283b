/*
 * linger_shim.c - LD_PRELOAD into a `capbroker serve` by
 * 912-notify-agent-sock-linger.sh: while the file $CB_LINGER_ARM exists,
 * the broker's close() of a TCP socket with unsent data waits 200 ms
 * first (and appends a line to $CB_LINGER_ARM.hit), as a broker thread
 * preempted by the agent it just answered would: the agent's own close of
 * its copy then comes before the broker's, which is the last.  Nothing
 * else changes.  Test code, never built into the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int
close(int fd)
{
	static int (*real)(int);
	const char *arm = getenv("CB_LINGER_ARM");
	int type = 0, dom = 0, outq = 0;
	socklen_t l = sizeof(int);

	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (arm && access(arm, F_OK) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_STREAM &&
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) == 0 &&
	    (dom == AF_INET || dom == AF_INET6) && ioctl(fd, SIOCOUTQ, &outq) == 0 && outq > 0) {
		char hit[4096];
		FILE *f;

		snprintf(hit, sizeof(hit), "%s.hit", arm);
		if ((f = fopen(hit, "a"))) {
			fprintf(f, "close %d outq %d\n", fd, outq);
			fclose(f);
		}
		nanosleep(&(struct timespec){ .tv_nsec = 200000000L }, NULL);
	}
	return real(fd);
}
