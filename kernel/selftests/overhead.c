// SPDX-License-Identifier: GPL-2.0
/*
 * Overhead of the patch, in the guest: the cost of sched_getweight() and
 * sched_setweight() next to getppid() (a trivial system call), and a
 * hackbench-like messaging run (groups of senders and receivers exchanging
 * small messages over pipes) whose time the patched and the stock kernel
 * are compared on. Prints "OVERHEAD <name> <value> <unit>".
 * Usage: overhead [--stock]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NR_sched_setweight 463
#define NR_sched_getweight 464

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double per_call_ns(long nr, long a, long b, long c, int n)
{
	double t0 = now();
	int i;

	for (i = 0; i < n; i++)
		syscall(nr, a, b, c);
	return (now() - t0) / n * 1e9;
}

/* groups × (20 senders → 20 receivers), each sender writing loops messages. */
static double messaging(int groups, int loops)
{
	double t0 = now();
	int g, s, r, i;

	for (g = 0; g < groups; g++) {
		for (r = 0; r < 20; r++) {
			int fds[2];

			if (pipe(fds))
				exit(2);
			if (fork() == 0) {	/* receiver */
				char buf[100];
				long want = 20L * loops * sizeof(buf), got = 0;

				close(fds[1]);
				while (got < want) {
					ssize_t n = read(fds[0], buf, sizeof(buf));
					if (n <= 0)
						break;
					got += n;
				}
				_exit(0);
			}
			close(fds[0]);
			for (s = 0; s < 20; s++) {
				if (fork() == 0) {	/* sender */
					char buf[100];

					memset(buf, 's', sizeof(buf));
					for (i = 0; i < loops; i++)
						if (write(fds[1], buf, sizeof(buf)) != sizeof(buf))
							_exit(1);
					_exit(0);
				}
			}
			close(fds[1]);
		}
	}
	while (wait(NULL) > 0)
		;
	return now() - t0;
}

int main(int argc, char **argv)
{
	int stock = argc > 1 && !strcmp(argv[1], "--stock");
	double best = 1e9, t;
	int i;

	printf("OVERHEAD getppid %.0f ns\n", per_call_ns(SYS_getppid, 0, 0, 0, 200000));
	if (!stock) {
		printf("OVERHEAD sched_getweight %.0f ns\n", per_call_ns(NR_sched_getweight, 0, 0, 0, 200000));
		/* alternate two weights so every call really changes the weight */
		double t0 = now();
		for (i = 0; i < 100000; i++)
			syscall(NR_sched_setweight, 0, 0, i & 1 ? 1024 : 1000);
		printf("OVERHEAD sched_setweight %.0f ns\n", (now() - t0) / 100000 * 1e9);
	}
	for (i = 0; i < 5; i++) {
		t = messaging(2, 100);
		if (t < best)
			best = t;
	}
	printf("OVERHEAD messaging %.3f s\n", best);
	return 0;
}
