/*
 * bench.h - small helpers shared by the benchmark programs: a clock, CPU
 * pinning, sorting samples and printing them as one JSON line each.
 *
 * Trust domain: none of the product's.  These programs measure; they run
 * on the host (floor, inproc) or as an agent inside a sandbox (agent).
 * Every result line is `{"name":"...","unit":"...","samples":[...]}` on
 * stdout; bench/bench.py collects them and computes medians and spreads.
 */
#ifndef CB_BENCH_H
#define CB_BENCH_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t
bn_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall clock: the one clock every process shares, inside a sandbox too
 * (there is no time namespace), used for start barriers across processes. */
static inline uint64_t
bn_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep until wall-clock time t (ns). */
static inline void
bn_wait_until(uint64_t t)
{
	struct timespec ts = { (time_t)(t / 1000000000ull), (long)(t % 1000000000ull) };

	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) != 0)
		;
}

/* Pin the calling process to one CPU; cpu < 0 leaves it free. */
static inline int
bn_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static inline int
bn_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One result line.  unit: "ns" (per operation), "ops/s", "bytes"... */
static inline void
bn_emit(const char *name, const char *unit, const double *v, size_t n)
{
	printf("{\"name\":\"%s\",\"unit\":\"%s\",\"samples\":[", name, unit);
	for (size_t i = 0; i < n; i++)
		printf("%s%.1f", i ? "," : "", v[i]);
	printf("]}\n");
	fflush(stdout);
}

static inline void
bn_emit1(const char *name, const char *unit, double v)
{
	bn_emit(name, unit, &v, 1);
}

/* Percentile (0..100) of n sorted samples. */
static inline double
bn_pct(const double *sorted, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return sorted[i < n ? i : n - 1];
}

#endif
