/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest experiments share for measuring: a process's CPU time and
 * threads, the median of windows, and the kernel's nice-to-weight table with
 * the nice level nearest a weight.
 */
#ifndef KUBEFAIR_MEASURE_H
#define KUBEFAIR_MEASURE_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* kernel/sched/core.c's sched_prio_to_weight, nice -20 .. 19. */
static const int prio_to_weight[40] = {
	88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
	9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
	1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
	110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
};

/* The nice level whose weight comes closest to @weight (nice 0 is 1024). */
static inline int nearest_nice(double weight)
{
	double err = 1e300;
	int i, best = 0;

	for (i = 0; i < 40; i++) {
		double e = fabs(log(prio_to_weight[i] / weight));

		if (e < err) {
			err = e;
			best = i;
		}
	}
	return best - 20;
}

/* A process's user + system CPU time in seconds, from /proc (0 if gone). */
static inline double process_cpu(pid_t pid)
{
	unsigned long utime = 0, stime = 0;
	char path[64], buf[1024], *p;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')') + 2;
	for (i = 0; i < 11; i++)	/* to field 14, utime */
		p = strchr(p, ' ') + 1;
	sscanf(p, "%lu %lu", &utime, &stime);
	return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

/*
 * The threads of process @pid other than its main thread (in the guest
 * programs, asleep while the others work), at most @max; returns how many.
 */
static inline int process_threads(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		pid_t tid = atoi(e->d_name);

		if (tid > 0 && tid != pid)
			tids[n++] = tid;
	}
	closedir(d);
	return n;
}

static inline int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of @n values (n odd), which it sorts in place. */
static inline double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), by_value);
	return v[n / 2];
}

#endif
