// SPDX-License-Identifier: GPL-2.0
/*
 * Table 5.3 of the thesis (seed 000 §5.4–5.5) in the guest: two processes
 * with 6 spinning threads each on CPU 0, the first at weight 1 and the
 * second at weight n = 1..5; the first should get 1/(1+n). Weightings:
 *   stock   no weights (every thread at nice 0)
 *   nice    the first process at nice 0, the second's threads at the nice
 *           level closest to n × 1024 (the best the stock kernel can do)
 *   pfs     the kernel's PFS mode, process weights 1024 and n × 1024
 *   twrs    the kernel's TWRS mode, process weights 1024 and n × 1024
 * Prints "T53 <mode> n share1% share2%": the median of three windows of
 * 4 s (one window once left equal threads 2.3 points off an even split).
 * Usage: table53 <mode> <n>...
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "measure.h"
#include "weight.h"

#define THREADS 6
#define WINDOWS 3

static void *spin(void *arg)
{
	for (;;)
		;
	return NULL;
}

static pid_t process(const char *mode, double weight, int nice)
{
	pid_t pid = fork();
	cpu_set_t cpu0;
	pthread_t t;
	int i;

	if (pid)
		return pid;
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	if (sched_setaffinity(0, sizeof(cpu0), &cpu0))
		_exit(6);
	if (!strcmp(mode, "pfs") && setweight(0, PROCESS_PFS, 1024 * weight))
		_exit(3);
	if (!strcmp(mode, "twrs") && setweight(0, PROCESS_TWRS, 1024 * weight))
		_exit(3);
	if (!strcmp(mode, "nice"))
		setpriority(PRIO_PROCESS, 0, nice);	/* new threads inherit it */
	for (i = 0; i < THREADS; i++)
		pthread_create(&t, NULL, spin, NULL);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "stock";
	cpu_set_t cpu1;
	int i;

	CPU_ZERO(&cpu1);
	CPU_SET(1, &cpu1);
	if (sched_setaffinity(0, sizeof(cpu1), &cpu1)) {	/* out of the way of CPU 0 */
		perror("table53: CPU 1");
		return 1;
	}
	for (i = 2; i < argc; i++) {
		double n = atof(argv[i]), before[2], used[2], first[WINDOWS], share;
		pid_t pid[2];
		int j, w;

		pid[0] = process(mode, 1, 0);
		pid[1] = process(mode, n, nearest_nice(1024 * n));
		sleep(1);
		for (w = 0; w < WINDOWS; w++) {
			for (j = 0; j < 2; j++)
				before[j] = process_cpu(pid[j]);
			sleep(4);
			for (j = 0; j < 2; j++)
				used[j] = process_cpu(pid[j]) - before[j];
			first[w] = 100 * used[0] / (used[0] + used[1]);
		}
		for (j = 0; j < 2; j++) {
			kill(pid[j], SIGKILL);
			waitpid(pid[j], NULL, 0);
		}
		share = median(first, WINDOWS);
		printf("T53 %-5s %g %5.1f %5.1f\n", mode, n, share, 100 - share);
		fflush(stdout);
	}
	return 0;
}
