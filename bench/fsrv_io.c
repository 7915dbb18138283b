/*
 * fsrv_io.c - the client side of bench/fsrv.sh: times one file operation in
 * a loop and prints the mean in microseconds.
 *
 *   fsrv-io read4k PATH N    open + read 4 KiB + close
 *   fsrv-io read1m PATH N    open + read 1 MiB (whole) + close
 *   fsrv-io cold1m PATH N    open + drop the file's cached pages
 *                            (POSIX_FADV_DONTNEED) + read 1 MiB + close: on a
 *                            FUSE mount every read then reaches the server
 *   fsrv-io openclose PATH N open + close
 *   fsrv-io stat PATH N      stat
 *
 * Trust domain: benchmark code on the host.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BIG (1 << 20)

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
once(const char *mode, const char *path, char *buf)
{
	struct stat st;
	ssize_t n, total = 0;
	int fd;

	if (strcmp(mode, "stat") == 0)
		return stat(path, &st);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (strcmp(mode, "openclose") == 0) {
		close(fd);
		return 0;
	}
	if (strcmp(mode, "cold1m") == 0)
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (strcmp(mode, "read4k") == 0) {
		n = read(fd, buf, 4096);
		total = n;
	} else {
		while (total < BIG && (n = read(fd, buf + total, (size_t)(BIG - total))) > 0)
			total += n;
	}
	close(fd);
	return total > 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	char *buf = malloc(BIG);
	long n;
	double t0;

	if (argc != 4 || buf == NULL || (n = atol(argv[3])) <= 0) {
		fprintf(stderr, "usage: fsrv-io read4k|read1m|cold1m|openclose|stat PATH N\n");
		return 64;
	}
	for (long i = 0; i < n / 10 + 1; i++)	/* warm up: caches, lookups */
		if (once(argv[1], argv[2], buf) != 0) {
			perror(argv[2]);
			return 1;
		}
	t0 = now_us();
	for (long i = 0; i < n; i++)
		if (once(argv[1], argv[2], buf) != 0) {
			perror(argv[2]);
			return 1;
		}
	printf("%.2f\n", (now_us() - t0) / (double)n);
	free(buf);
	return 0;
}
