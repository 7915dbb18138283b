/*
 * fsrv_io.c - the client side of bench/fsrv.sh: times one file operation in
 * a loop and prints the mean in microseconds.
 *
 *   fsrv-io read4k PATH N    open + read 4 KiB + close
 *   fsrv-io read1m PATH N    open + read 1 MiB (whole) + close
 *   fsrv-io cold1m PATH N    open + drop the file's cached pages
 *                            (POSIX_FADV_DONTNEED) + read 1 MiB + close: on a
 *                            FUSE mount every read then reaches the server
 *   fsrv-io pread1m PATH N   pread 1 MiB at offset 0 of a file opened once:
 *                            the read alone, without the open's and the
 *                            release's round trips
 *   fsrv-io openclose PATH N open + close
 *   fsrv-io stat PATH N      stat
 *
 * The buffer is one transparent huge page where the kernel gives one
 * (MADV_HUGEPAGE; "madvise" is Debian's default).  The machines of these
 * runs copy page cache into 4 KiB user pages about ten times slower than
 * into a huge page (docs/performance.md, "Open and release, cut"), which
 * made the host's 1 MiB read so slow that a FUSE server's two round trips
 * an open vanished in it; the same buffer on both sides, and a fast copy,
 * let the 1 MiB rows show what serving costs.  Without a huge page the
 * rows still run, and a line on stderr says so.
 *
 * Trust domain: benchmark code on the host.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BIG (1 << 20)
#define HUGE (2u << 20)

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

/* The 1 MiB buffer, in one huge page if the kernel gives one. */
static char *
buffer(void)
{
	char *buf = aligned_alloc(HUGE, HUGE);
	unsigned long kb = 0;
	char line[128];
	FILE *f;

	if (buf == NULL)
		return NULL;
	(void)madvise(buf, HUGE, MADV_HUGEPAGE);
	memset(buf, 1, HUGE);
	if ((f = fopen("/proc/self/smaps_rollup", "r")) != NULL) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "AnonHugePages: %lu kB", &kb) == 1)
				break;
		fclose(f);
	}
	if (kb < HUGE / 1024)
		fprintf(stderr, "fsrv-io: the buffer is not in a huge page (%lu kB of huge pages)\n", kb);
	return buf;
}

/* pread1m: the file opened once, then n reads of the whole MiB. */
static int
preads(const char *path, long n, char *buf, double *us)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	double t0 = 0.0;

	if (fd < 0)
		return -1;
	for (long i = -(n / 10 + 1); i < n; i++) {
		if (i == 0)
			t0 = now_us();
		if (pread(fd, buf, BIG, 0) != BIG) {
			close(fd);
			return -1;
		}
	}
	*us = (now_us() - t0) / (double)n;
	close(fd);
	return 0;
}

int
main(int argc, char **argv)
{
	char *buf;
	long n;
	double t0, us;

	if (argc != 4 || (n = atol(argv[3])) <= 0) {
		fprintf(stderr, "usage: fsrv-io read4k|read1m|pread1m|cold1m|openclose|stat PATH N\n");
		return 64;
	}
	if ((buf = buffer()) == NULL) {
		perror("fsrv-io: buffer");
		return 1;
	}
	if (strcmp(argv[1], "pread1m") == 0) {
		if (preads(argv[2], n, buf, &us) != 0) {
			perror(argv[2]);
			return 1;
		}
		printf("%.2f\n", us);
		free(buf);
		return 0;
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
