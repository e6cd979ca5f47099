// SPDX-License-Identifier: GPL-2.0
/*
 * The thesis's S0 experiment (seed 000 §3.4) in the guest: processes A, B and
 * C with 1, 8 and k spinning threads on CPU 0, each process's share of the
 * CPU measured over a window, under three weightings:
 *   stock   every thread at nice 0 (threads compete one by one)
 *   nice    process-fair (PFS) thread weights rounded to nice levels
 *   weight  PFS thread weights set exactly with sched_setweight()
 * Prints one table row per (k, weighting): "S0 <mode> k A% B% C% gap".
 * Usage: s0 <mode> <k>...   (mode: stock | nice | weight)
 */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define NR_sched_setweight 463

static const int prio_to_weight[40] = {
	88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
	9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
	1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
	110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
};

static int nearest_nice(double w)
{
	int best = 0, i;
	double err = 1e300;

	for (i = 0; i < 40; i++) {
		double e = fabs(log(prio_to_weight[i] / w));
		if (e < err) {
			err = e;
			best = i;
		}
	}
	return best - 20;
}

/* The process weight in units of nice 0 (S0_SCALE in the environment). */
static double scale = 1;

struct spin_arg {
	const char *mode;
	int threads;
	int next;	/* index handed to the next thread */
	pthread_mutex_t lock;
	pthread_barrier_t *ready;
};

static void *spin(void *p)
{
	struct spin_arg *a = p;
	/* PFS: a process weight of scale × 1024 divided by its threads. */
	double w = 1024.0 * scale / a->threads;
	unsigned int total = 1024 * scale, me;

	pthread_mutex_lock(&a->lock);
	me = a->next++;
	pthread_mutex_unlock(&a->lock);
	if (!strcmp(a->mode, "weight")) {
		/* Integer weights that add up to exactly the process weight. */
		unsigned int tw = total / a->threads + (me < total % a->threads);

		syscall(NR_sched_setweight, 0, 0, tw < 2 ? 2 : tw);
	}
	else if (!strcmp(a->mode, "nice"))
		setpriority(PRIO_PROCESS, 0, nearest_nice(w / scale));
	pthread_barrier_wait(a->ready);
	for (;;)
		;
	return NULL;
}

/* A child process spinning n threads on CPU 0; never returns. */
static void child(const char *mode, int n)
{
	pthread_barrier_t ready;
	struct spin_arg a = { mode, n, 0, PTHREAD_MUTEX_INITIALIZER, &ready };
	pthread_t t;
	int i;

	pthread_barrier_init(&ready, NULL, n + 1);
	for (i = 0; i < n; i++)
		pthread_create(&t, NULL, spin, &a);
	pthread_barrier_wait(&ready);
	for (;;)
		pause();
}

static double process_cpu(pid_t pid)
{
	char path[64];
	unsigned long utime, stime;
	FILE *f;
	int i;
	char buf[1024], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')') + 2;
	for (i = 0; i < 11; i++)	/* skip to field 14 (utime) */
		p = strchr(p, ' ') + 1;
	sscanf(p, "%lu %lu", &utime, &stime);
	return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "stock";
	cpu_set_t cpu0;
	int i, j;

	if (getenv("S0_SCALE"))
		scale = atof(getenv("S0_SCALE"));

	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	sched_setaffinity(0, sizeof(cpu0), &cpu0);	/* children inherit it */
	for (i = 2; i < argc; i++) {
		int k = atoi(argv[i]), n[3] = { 1, 8, k };
		pid_t pid[3];
		double before[3], share[3], total = 0, lo = 1, hi = 0;

		for (j = 0; j < 3; j++) {
			pid[j] = fork();
			if (pid[j] == 0)
				child(mode, n[j]);
		}
		sleep(1);	/* all threads running and weighted */
		for (j = 0; j < 3; j++)
			before[j] = process_cpu(pid[j]);
		sleep(4);
		for (j = 0; j < 3; j++) {
			share[j] = process_cpu(pid[j]) - before[j];
			total += share[j];
		}
		for (j = 0; j < 3; j++) {
			share[j] /= total;
			lo = share[j] < lo ? share[j] : lo;
			hi = share[j] > hi ? share[j] : hi;
			kill(pid[j], SIGKILL);
			waitpid(pid[j], NULL, 0);
		}
		printf("S0 %-6s %3d %5.1f %5.1f %5.1f %5.1f\n", mode, k,
		       100 * share[0], 100 * share[1], 100 * share[2], 100 * (hi - lo));
		fflush(stdout);
	}
	return 0;
}
