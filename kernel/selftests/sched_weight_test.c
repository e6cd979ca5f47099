// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests for sched_setweight()/sched_getweight(), run inside a QEMU guest
 * by test/kernel. Prints TAP: "ok N name" / "not ok N name # why".
 * On a kernel without the patch every call must fail with ENOSYS and the ABI
 * probe file must be absent (run with --stock).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weight.h"

/* --- inheritance --- */
static void *read_own_weight(void *arg)
{
	*(long *)arg = getweight(0, 0);
	return NULL;
}

/* --- process scope --- */
static pthread_barrier_t barrier;
static void *wait_at_barrier(void *arg)
{
	*(pid_t *)arg = gettid();
	pthread_barrier_wait(&barrier);	/* tid published */
	pthread_barrier_wait(&barrier);	/* checked */
	return NULL;
}

/* --- weights take effect --- */
struct spinner {
	unsigned int weight;
	volatile int *stop;
	double cpu;
	pthread_barrier_t *start;
};

static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *spin(void *arg)
{
	struct spinner *s = arg;
	cpu_set_t one;
	double start;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	setweight(0, 0, s->weight);
	pthread_barrier_wait(s->start);
	start = thread_cpu();
	while (!*s->stop)
		;
	s->cpu = thread_cpu() - start;
	return NULL;
}

/* Two threads on CPU 0 at weights a:b; returns a's share of their CPU. */
static double share_of_first(unsigned int a, unsigned int b, int seconds)
{
	volatile int stop = 0;
	pthread_barrier_t start;
	struct spinner s[2] = { { a, &stop, 0, &start }, { b, &stop, 0, &start } };
	pthread_t t[2];
	int i;

	pthread_barrier_init(&start, NULL, 3);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, spin, &s[i]);
	pthread_barrier_wait(&start);
	sleep(seconds);
	stop = 1;
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return s[0].cpu / (s[0].cpu + s[1].cpu);
}

static void stock_kernel(void)
{
	EXPECT("stock: no ABI probe file", probe_abi() == -1);
	EXPECT_ERR("stock: sched_setweight is ENOSYS", setweight(0, 0, 1024), ENOSYS);
	EXPECT_ERR("stock: sched_getweight is ENOSYS", getweight(0, 0), ENOSYS);
}

int main(int argc, char **argv)
{
	printf("TAP version 13\n");
	if (argc > 1 && !strcmp(argv[1], "--stock")) {
		stock_kernel();
		goto out;
	}

	EXPECT("ABI probe reads 2", probe_abi() == 2);
	EXPECT("default weight is nice 0's 1024", getweight(0, 0) == 1024);
	EXPECT_ERR("unknown flag is EINVAL", setweight(0, 0x10, 1024), EINVAL);
	EXPECT_ERR("unknown flag on get is EINVAL", getweight(0, 0x10), EINVAL);
	EXPECT_ERR("weight below the minimum is EINVAL", setweight(0, 0, 1), EINVAL);
	EXPECT_ERR("weight above the maximum is EINVAL", setweight(0, 0, (1u << 20) + 1), EINVAL);
	EXPECT_ERR("negative pid is EINVAL", setweight(-5, 0, 1024), EINVAL);
	EXPECT_ERR("missing pid is ESRCH", setweight(999999, 0, 1024), ESRCH);
	EXPECT_ERR("missing pid on get is ESRCH", getweight(999999, 0), ESRCH);

	EXPECT("set 512", setweight(0, 0, 512) == 0 && getweight(0, 0) == 512);
	EXPECT("the maximum is accepted", setweight(0, 0, 1u << 20) == 0 && getweight(0, 0) == (1 << 20));
	EXPECT("0 restores the nice weight", setweight(0, 0, 0) == 0 && getweight(0, 0) == 1024);

	setweight(0, 0, 700);
	setpriority(PRIO_PROCESS, 0, 5);
	EXPECT("setpriority keeps a set weight", getweight(0, 0) == 700);
	setweight(0, 0, 0);
	EXPECT("after reset the nice 5 weight rules", getweight(0, 0) == 335);
	setpriority(PRIO_PROCESS, 0, 0);

	setweight(0, 0, 300);
	{
		pthread_t t;
		long child = 0;

		pthread_create(&t, NULL, read_own_weight, &child);
		pthread_join(t, NULL);
		EXPECT("new threads inherit the weight", child == 300);
	}
	setweight(0, 0, 0);

	{
		pthread_t t[3];
		pid_t tids[3];
		int i, all = 1;

		pthread_barrier_init(&barrier, NULL, 4);
		for (i = 0; i < 3; i++)
			pthread_create(&t[i], NULL, wait_at_barrier, &tids[i]);
		pthread_barrier_wait(&barrier);
		EXPECT("process scope sets every thread", setweight(getpid(), SCHED_WEIGHT_PROCESS, 2000) == 0);
		for (i = 0; i < 3; i++)
			all = all && getweight(tids[i], 0) == 2000;
		EXPECT("every thread has the process weight", all && getweight(0, 0) == 2000);
		EXPECT("process-scope get reads the main thread", getweight(getpid(), SCHED_WEIGHT_PROCESS) == 2000);
		pthread_barrier_wait(&barrier);
		for (i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
		setweight(getpid(), SCHED_WEIGHT_PROCESS, 0);
	}

	{
		pid_t child = fork();
		int status = 0;

		if (child == 0) {
			int bad = 0;

			if (setgid(65534) || setuid(65534))
				_exit(10);
			errno = 0;
			if (setweight(0, 0, 100) != 0)
				bad |= 1;	/* lowering one's own weight is allowed */
			if (setweight(0, 0, 200) != -1 || errno != EPERM)
				bad |= 2;	/* raising it is not */
			if (setweight(1, 0, 100) != -1 || errno != EPERM)
				bad |= 4;	/* nor touching root's task */
			if (setweight(0, 0, 0) != -1 || errno != EPERM)
				bad |= 8;	/* nor resetting up to 1024 */
			_exit(bad);
		}
		waitpid(child, &status, 0);
		EXPECT("an unprivileged user may lower but not raise, nor touch others",
		       WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}

	{
		/*
		 * The security modules are asked: the capability module refuses
		 * a caller without CAP_SYS_NICE a task holding capabilities the
		 * caller lacks, even a lowering its own checks allow (same
		 * owner, root).
		 */
		pid_t target = fork(), child;
		int status = 0;

		if (target == 0) {
			pause();
			_exit(0);
		}
		child = fork();
		if (child == 0) {
			struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
			struct __user_cap_data_struct data[2];
			int bad = 0;

			if (syscall(SYS_capget, &hdr, data))
				_exit(10);
			data[CAP_TO_INDEX(CAP_SYS_NICE)].effective &= ~CAP_TO_MASK(CAP_SYS_NICE);
			data[CAP_TO_INDEX(CAP_SYS_NICE)].permitted &= ~CAP_TO_MASK(CAP_SYS_NICE);
			if (syscall(SYS_capset, &hdr, data))
				_exit(11);
			if (setweight(0, 0, 512) != 0)
				bad |= 1;	/* its own task: allowed */
			errno = 0;
			if (setweight(target, 0, 512) != -1 || errno != EPERM)
				bad |= 2;	/* the fuller task: refused */
			errno = 0;
			if (setweight(target, SCHED_WEIGHT_PROCESS, 512) != -1 || errno != EPERM)
				bad |= 4;	/* at process scope too */
			_exit(bad);
		}
		waitpid(child, &status, 0);
		EXPECT("the security modules decide (a caller without CAP_SYS_NICE may not lower a task with more capabilities)",
		       WIFEXITED(status) && WEXITSTATUS(status) == 0);
		EXPECT("a refused call leaves the weight as it was", getweight(target, 0) == 1024);
		kill(target, SIGKILL);
		waitpid(target, NULL, 0);
	}

	{
		/*
		 * SCHED_RESET_ON_FORK treats a weight as it treats a nice value:
		 * one above what the child's nice level gives is dropped, one
		 * below it (an administrator's lowering) is kept.
		 */
		unsigned int set[2] = { 100, 4096 };
		long want[2] = { 100, 1024 };
		const char *names[2] = {
			"SCHED_RESET_ON_FORK keeps a lowered weight (100)",
			"SCHED_RESET_ON_FORK drops a raised weight (4096 -> 1024)",
		};
		int i;

		for (i = 0; i < 2; i++) {
			pid_t child = fork();
			int status = -1;

			if (child == 0) {
				struct sched_param sp = { 0 };
				pid_t grandchild;

				if (setweight(0, 0, set[i]) ||
				    sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp))
					_exit(10);
				grandchild = fork();
				if (grandchild == 0)
					_exit(getweight(0, 0) == want[i] ? 0 : 1);
				waitpid(grandchild, &status, 0);
				_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 11);
			}
			waitpid(child, &status, 0);
			EXPECT(names[i], WIFEXITED(status) && WEXITSTATUS(status) == 0);
		}
	}

	{
		double s = share_of_first(256, 768, 3);
		char name[96];

		snprintf(name, sizeof(name), "threads at 1:3 on one CPU get 25%% (got %.1f%%)", 100 * s);
		EXPECT(name, s > 0.23 && s < 0.27);
		s = share_of_first(1024, 1024, 2);
		snprintf(name, sizeof(name), "threads at 1:1 on one CPU get 50%% (got %.1f%%)", 100 * s);
		EXPECT(name, s > 0.48 && s < 0.52);
	}
out:
	printf("1..%d\n# %d failed\n", tests, failures);
	return failures ? 1 : 0;
}
