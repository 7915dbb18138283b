/*
 * net_ptrace_connect.c - escape attempt: rewrite a mediated connect()'s address or registers from another process (ptrace, process_vm_writev, /proc/PID/mem).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * A child connects again and again to 127.0.0.1:PORT (covered).  The
 * parent goes for the child's call from outside: a tracer could change the
 * system call's registers after the filter ran, process_vm_writev or a
 * write to /proc/CHILD/mem could flip the sockaddr to 127.0.0.2 (the same
 * host service, not covered) while the broker handles the notification,
 * and pidfd_getfd could take the broker's socket out of the child.
 * ptrace (attach, seize, traceme), process_vm_readv/writev, pidfd_getfd and
 * kcmp must fail with EPERM.  /proc/CHILD/mem may be writable (the same
 * uid, a descendant: no more than a thread of the child could do), so the
 * parent flips the address through it as fast as it can; every connect()
 * of the child must still be refused (EACCES) or end at 127.0.0.1: the
 * broker judges and connects to its own copy of the address.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/escape/escape.h"

static struct sockaddr_in target;

/* The child: connect for a while; 0 if every connect ended at 127.0.0.1
 * or was refused and at least one succeeded, 3 if one was redirected. */
static int
child(void)
{
	time_t end = time(NULL) + 3;
	int ok = 0, refused = 0;

	while (time(NULL) < end) {
		struct sockaddr_in peer;
		socklen_t l = sizeof(peer);
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0)
			return 2;
		if (connect(s, (struct sockaddr *)&target, sizeof(target)) == 0) {
			if (getpeername(s, (struct sockaddr *)&peer, &l) != 0 ||
			    peer.sin_addr.s_addr != htonl(0x7f000001)) {
				printf("ESCAPE: the child connected to %s\n", inet_ntoa(peer.sin_addr));
				return 3;
			}
			ok++;
		} else if (errno == EACCES) {
			refused++;
		} else {
			printf("ESCAPE: the child's connect failed with %s\n", strerror(errno));
			return 3;
		}
		close(s);
	}
	printf("child: %d connects reached 127.0.0.1, %d refused\n", ok, refused);
	return ok > 0 ? 0 : 4;
}

int
main(int argc, char **argv)
{
	uint32_t bad = htonl(0x7f000002), good = htonl(0x7f000001);
	struct iovec lv = { &bad, sizeof(bad) }, rv = { &target.sin_addr.s_addr, sizeof(bad) };
	char mem[64];
	int st, pidfd, memfd;
	time_t end;
	pid_t p;

	if (argc < 2)
		return 2;
	target.sin_family = AF_INET;
	target.sin_port = htons((uint16_t)atoi(argv[1]));
	target.sin_addr.s_addr = good;
	fflush(stdout);
	if ((p = fork()) < 0)
		return 2;
	if (p == 0) {
		esc_errno(ptrace(PTRACE_TRACEME, 0, NULL, NULL), "ptrace(TRACEME)", EPERM, 0);
		_exit(esc_bad ? 3 : child());
	}
	esc_errno(ptrace(PTRACE_ATTACH, p, NULL, NULL), "ptrace(ATTACH) of the child", EPERM, 0);
	esc_errno(ptrace(PTRACE_SEIZE, p, NULL, NULL), "ptrace(SEIZE) of the child", EPERM, 0);
	esc_errno(process_vm_writev(p, &lv, 1, &rv, 1, 0), "process_vm_writev of the sockaddr",
	    EPERM, 0);
	esc_errno(process_vm_readv(p, &lv, 1, &rv, 1, 0), "process_vm_readv", EPERM, 0);
	if ((pidfd = (int)syscall(SYS_pidfd_open, p, 0)) >= 0) {
		for (int fd = 3; fd < 8; fd++)
			esc_errno(syscall(SYS_pidfd_getfd, pidfd, fd, 0), "pidfd_getfd of the child's socket",
			    EPERM, 0);
		close(pidfd);
	}
	esc_errno(syscall(SYS_kcmp, getpid(), p, 0, 3, 3), "kcmp", EPERM, 0);
	snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)p);
	if ((memfd = open(mem, O_RDWR | O_CLOEXEC)) >= 0) {
		off_t at = (off_t)(uintptr_t)&target.sin_addr.s_addr;

		for (end = time(NULL) + 3; time(NULL) < end;) {
			if (pwrite(memfd, &bad, sizeof(bad), at) != sizeof(bad) ||
			    pwrite(memfd, &good, sizeof(good), at) != sizeof(good))
				break;	/* the child is gone */
		}
		close(memfd);
	}
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st))
		esc_escaped("the child did not exit normally");
	else if (WEXITSTATUS(st) == 4)
		esc_escaped("no connect of the child succeeded: the race was not run");
	else if (WEXITSTATUS(st) != 0)
		esc_escaped("the child reported an escape (%d)", WEXITSTATUS(st));
	return esc_done("ptrace, process_vm_*, pidfd_getfd, kcmp: EPERM; the address flipped "
	    "through /proc/PID/mem%s never redirected a connect", memfd >= 0 ? "" : " (not writable)");
}
