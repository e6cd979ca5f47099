// SPDX-License-Identifier: GPL-2.0
/*
 * The thesis's S0 experiment (seed 000 §3.4–3.6) in the guest: processes A,
 * B and C with 1, 8 and k threads on CPU 0, under one weighting:
 *   stock   every thread at nice 0 (threads compete one by one)
 *   nice    process-fair (PFS) thread weights rounded to nice levels
 *   weight  PFS thread weights set once per thread with sched_setweight()
 *   pfs     the kernel's PFS mode, process weight 1024
 *   twrs    the kernel's TWRS mode, process weight 1024
 * Two runs per k:
 *   shares       the threads spin; after two rounds (at least 3 s), each
 *                process's share, the median of three windows of five
 *                rounds (at least 3 s; 12 s at k = 200), a round being
 *                how long C's threads take to run once each
 *   fixed work   each process has 1 s of CPU work split among its threads
 *                (S0_WORK seconds in the environment); per process, the
 *                turnaround (start to last thread done) and the waiting
 *                time (turnaround − CPU time), averaged over A, B and C
 * Prints one row per k: "S0 <mode> k A% B% C% gap wait-s turnaround-s".
 * Usage: s0 <mode> <k>...
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "measure.h"
#include "weight.h"

/* The process weight in units of nice 0 (S0_SCALE in the environment). */
static double scale = 1;
/* CPU seconds of work per process in the fixed-work run. */
static double work = 1;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct spin_arg {
	const char *mode;
	int threads;
	double work;	/* CPU seconds per thread; 0 spins forever */
	int next;	/* index handed to the next thread */
	pthread_mutex_t lock;
	pthread_barrier_t *ready, *go;
};

static void *spin(void *p)
{
	struct spin_arg *a = p;
	/* PFS: a process weight of scale × 1024 divided by its threads. */
	double w = 1024.0 * scale / a->threads;
	unsigned int total = 1024 * scale, me;
	volatile unsigned long n = 0;

	pthread_mutex_lock(&a->lock);
	me = a->next++;
	pthread_mutex_unlock(&a->lock);
	if (!strcmp(a->mode, "weight")) {
		/* Integer weights that add up to exactly the process weight. */
		unsigned int tw = total / a->threads + (me < total % a->threads);

		setweight(0, 0, tw < 2 ? 2 : tw);
	} else if (!strcmp(a->mode, "nice")) {
		setpriority(PRIO_PROCESS, 0, nearest_nice(w / scale));
	}
	pthread_barrier_wait(a->ready);
	pthread_barrier_wait(a->go);
	if (!a->work)
		for (;;)
			;
	do {
		for (int i = 0; i < 20000; i++)
			n++;
	} while (thread_cpu() < a->work);
	return NULL;
}

/*
 * A child process running n threads on CPU 0, released when the parent
 * closes the go pipe; with work, it exits when all threads are done.
 */
static void child(const char *mode, int n, double per_process_work, int go_fd)
{
	pthread_barrier_t ready, go;
	struct spin_arg a = { mode, n, per_process_work / n, 0, PTHREAD_MUTEX_INITIALIZER, &ready, &go };
	pthread_t *t = calloc(n, sizeof(*t));
	cpu_set_t cpu0;
	char c;
	int i;

	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	if (sched_setaffinity(0, sizeof(cpu0), &cpu0))	/* threads inherit it */
		_exit(6);

	if (!strcmp(mode, "pfs") || !strcmp(mode, "twrs")) {
		unsigned int flags = SCHED_WEIGHT_PROCESS |
			(mode[0] == 'p' ? SCHED_WEIGHT_MODE_PFS : SCHED_WEIGHT_MODE_TWRS);

		if (setweight(0, flags, 1024 * scale))
			_exit(3);
	}
	pthread_barrier_init(&ready, NULL, n + 1);
	pthread_barrier_init(&go, NULL, n + 1);
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, spin, &a);
	pthread_barrier_wait(&ready);
	if (read(go_fd, &c, 1) != 0)	/* EOF: go */
		_exit(4);
	pthread_barrier_wait(&go);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	_exit(0);
}

/*
 * The weights a process's spinning threads have now (not its main thread,
 * asleep in pthread_join()), from sched_getweight(): "S0T" with how many,
 * the least, the most and their sum. Silent where the call is missing.
 */
static void thread_weights(const char *mode, int k, int w, int j, pid_t pid)
{
	static pid_t tids[4096];
	long lo = -1, hi = 0, sum = 0, v;
	int all = process_threads(pid, tids, 4096), i, n = 0;

	for (i = 0; i < all; i++) {
		v = getweight(tids[i], 0);
		if (v < 0)
			continue;
		lo = lo < 0 || v < lo ? v : lo;
		hi = v > hi ? v : hi;
		sum += v;
		n++;
	}
	if (n)
		printf("S0T %-6s %3d %d %c threads %d weights %ld..%ld sum %ld\n", mode, k, w, 'A' + j, n, lo, hi, sum);
}

/* Starts A, B and C; returns when all their threads are ready, then goes. */
static double start(const char *mode, const int *n, double per_process_work, pid_t *pid)
{
	int go[2], j;

	if (pipe(go))
		exit(2);
	for (j = 0; j < 3; j++) {
		pid[j] = fork();
		if (pid[j] == 0) {
			close(go[1]);
			child(mode, n[j], per_process_work, go[0]);
		}
	}
	close(go[0]);
	usleep(300000 + 5000 * (n[0] + n[1] + n[2]));	/* threads created, weighted, waiting */
	close(go[1]);
	return now();
}

/*
 * How long C's k threads take to run once each: one 4-ms tick apiece
 * (HZ=250) while C has a third of CPU 0. The mode's weights settle within
 * the first round (a thread counts from its first pick), and C's threads
 * are served in bursts about a round long: with 200 threads one-second
 * windows swing between 10 and 57 % around a mean of a third, so a window
 * must span several rounds.
 */
static double round_s(int k)
{
	return k * 0.004 * 3;
}

/*
 * Spinning threads: each process's share of CPU 0 in percent, the median of
 * WINDOWS windows of five rounds, at least 3 s each (each window printed as
 * "S0W ...", the weights the kernel gave each process's threads as "S0T"):
 * a window in which the host stole the guest's CPU does not decide the row.
 */
#define WINDOWS 3
static void shares(const char *mode, int k, const int *n, double *share)
{
	double before[3], got[3][WINDOWS], total;
	double window = fmax(3, 5 * round_s(k));
	pid_t pid[3];
	int j, w;

	start(mode, n, 0, pid);
	usleep(fmax(3, 2 * round_s(k)) * 1e6);	/* steady state */
	for (w = 0; w < WINDOWS; w++) {
		for (j = 0; j < 3; j++)
			before[j] = process_cpu(pid[j]);
		usleep(window * 1e6);
		total = 0;
		for (j = 0; j < 3; j++) {
			got[j][w] = process_cpu(pid[j]) - before[j];
			total += got[j][w];
		}
		for (j = 0; j < 3; j++)
			got[j][w] = 100 * got[j][w] / total;
		printf("S0W %-6s %3d %d %5.1f %5.1f %5.1f\n", mode, k, w, got[0][w], got[1][w], got[2][w]);
		for (j = 0; j < 3; j++)
			thread_weights(mode, k, w, j, pid[j]);
	}
	for (j = 0; j < 3; j++) {
		share[j] = median(got[j], WINDOWS);
		kill(pid[j], SIGKILL);
		waitpid(pid[j], NULL, 0);
	}
}

/* Fixed work: average waiting and turnaround time of A, B and C. */
static void times(const char *mode, const int *n, double *wait, double *turnaround)
{
	double t0, cpu;
	struct rusage ru;
	pid_t pid[3], done;
	int j, status;

	t0 = start(mode, n, work, pid);
	*wait = *turnaround = 0;
	for (j = 0; j < 3; j++) {
		done = wait4(-1, &status, 0, &ru);
		if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			exit(5);
		cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		      ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		*turnaround += (now() - t0) / 3;
		*wait += (now() - t0 - cpu) / 3;
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "stock";
	cpu_set_t cpu1;
	int i;

	CPU_ZERO(&cpu1);
	CPU_SET(1, &cpu1);
	if (sched_setaffinity(0, sizeof(cpu1), &cpu1)) {	/* out of the way of CPU 0 */
		perror("s0: CPU 1");
		return 1;
	}

	if (getenv("S0_SCALE"))
		scale = atof(getenv("S0_SCALE"));
	if (getenv("S0_WORK"))
		work = atof(getenv("S0_WORK"));

	for (i = 2; i < argc; i++) {
		int k = atoi(argv[i]), n[3] = { 1, 8, k }, j;
		double share[3], lo = 100, hi = 0, wait, turnaround;

		shares(mode, k, n, share);
		for (j = 0; j < 3; j++) {
			lo = share[j] < lo ? share[j] : lo;
			hi = share[j] > hi ? share[j] : hi;
		}
		times(mode, n, &wait, &turnaround);
		printf("S0 %-6s %3d %5.1f %5.1f %5.1f %5.1f %6.3f %6.3f\n", mode, k,
		       share[0], share[1], share[2], hi - lo, wait, turnaround);
		fflush(stdout);
	}
	return 0;
}
