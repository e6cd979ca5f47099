// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests for the process weight modes of sched_setweight() (ABI 2):
 * PFS (thread weight = process weight / runnable threads of the process) and
 * TWRS (thread weight = process weight × (runnable threads on the CPU −
 * those of the process there)). Run inside the patched kernel's QEMU guest
 * by test/kernel; prints TAP.
 *
 * Spinning threads live in "gangs": child processes pinned to CPU 0 whose
 * threads the test adds and stops through a pipe. The test itself runs on
 * CPU 1, so that only the gangs compete on CPU 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "measure.h"
#include "weight.h"

#define MAX_GANG 64

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		printf("Bail out! cannot run on CPU %d: %s\n", cpu, strerror(errno));
		exit(2);
	}
}

static volatile int stop[MAX_GANG];

static void *spin(void *arg)
{
	volatile int *mine = arg;

	while (!*mine)
		;
	return NULL;
}

struct gang {
	pid_t pid;
	int ctl;	/* write '+' to add a thread, '-' to stop the newest */
	int threads;
};

/* A gang of n spinning threads, in a mode when flags says so. */
static struct gang gang_start(int n, unsigned int flags, unsigned int weight)
{
	struct gang g = { 0, -1, n };
	int fds[2];

	if (pipe(fds))
		exit(2);
	g.pid = fork();
	if (g.pid == 0) {
		pthread_t t[MAX_GANG];
		int running = 0;
		char c;

		close(fds[1]);
		pin(0);
		if (flags && setweight(0, flags, weight))
			_exit(3);
		for (; running < n; running++)
			pthread_create(&t[running], NULL, spin, (void *)&stop[running]);
		while (read(fds[0], &c, 1) == 1) {
			if (c == '+' && running < MAX_GANG) {
				stop[running] = 0;
				pthread_create(&t[running], NULL, spin, (void *)&stop[running]);
				running++;
			} else if (c == '-' && running > 0) {
				running--;
				stop[running] = 1;
				pthread_join(t[running], NULL);
			}
		}
		_exit(0);
	}
	close(fds[0]);
	g.ctl = fds[1];
	return g;
}

static void gang_add(struct gang *g, int n)
{
	for (; n > 0; n--, g->threads++)
		if (write(g->ctl, "+", 1) != 1)
			exit(2);
}

static void gang_stop(struct gang *g, int n)
{
	for (; n > 0; n--, g->threads--)
		if (write(g->ctl, "-", 1) != 1)
			exit(2);
}

static void gang_end(struct gang *g)
{
	kill(g->pid, SIGKILL);
	waitpid(g->pid, NULL, 0);
	close(g->ctl);
}

/* Each gang's share, in percent, of the CPU the gangs used over seconds. */
static void shares(struct gang *g, int n, int seconds, double *out)
{
	double before[8], total = 0;
	int i;

	for (i = 0; i < n; i++)
		before[i] = process_cpu(g[i].pid);
	sleep(seconds);
	for (i = 0; i < n; i++) {
		out[i] = process_cpu(g[i].pid) - before[i];
		total += out[i];
	}
	for (i = 0; i < n; i++)
		out[i] = 100 * out[i] / total;
}

/* Waits up to two seconds for every thread of the gang to weigh want. */
static int gang_weighs(struct gang *g, long want, long *got)
{
	pid_t tids[MAX_GANG];
	int tries, i, n;

	for (tries = 0; tries < 40; tries++) {
		int all = 1;

		n = process_threads(g->pid, tids, MAX_GANG);
		for (i = 0; i < n; i++) {
			*got = getweight(tids[i], 0);
			if (*got != want)
				all = 0;
		}
		if (all && n == g->threads)
			return 1;
		usleep(50000);
	}
	return 0;
}

static void errors(void)
{
	EXPECT_ERR("a mode without SCHED_WEIGHT_PROCESS is EINVAL",
		   setweight(0, SCHED_WEIGHT_MODE_PFS, 1024), EINVAL);
	EXPECT_ERR("two modes are EINVAL",
		   setweight(0, PROCESS_PFS | SCHED_WEIGHT_MODE_TWRS, 1024), EINVAL);
	EXPECT_ERR("SCHED_WEIGHT_GET_MODE on set is EINVAL",
		   setweight(0, SCHED_WEIGHT_PROCESS | SCHED_WEIGHT_GET_MODE, 1024), EINVAL);
	EXPECT_ERR("a mode weight below the minimum is EINVAL",
		   setweight(0, PROCESS_PFS, 1), EINVAL);
	EXPECT_ERR("a mode weight above the maximum is EINVAL",
		   setweight(0, PROCESS_TWRS, (1u << 20) + 1), EINVAL);
	EXPECT_ERR("a mode on a negative pid is EINVAL",
		   setweight(-1, PROCESS_PFS, 1024), EINVAL);
	EXPECT_ERR("a mode on a missing pid is ESRCH",
		   setweight(999999, PROCESS_TWRS, 1024), ESRCH);
	EXPECT_ERR("SCHED_WEIGHT_GET_MODE without SCHED_WEIGHT_PROCESS is EINVAL",
		   getweight(0, SCHED_WEIGHT_GET_MODE), EINVAL);
	EXPECT_ERR("a mode flag on get is EINVAL", getweight(0, PROCESS_PFS), EINVAL);
	EXPECT_ERR("the mode of a missing pid is ESRCH",
		   getweight(999999, SCHED_WEIGHT_PROCESS | SCHED_WEIGHT_GET_MODE), ESRCH);
}

static long mode_of(pid_t pid)
{
	return getweight(pid, SCHED_WEIGHT_PROCESS | SCHED_WEIGHT_GET_MODE);
}

static void set_get_reset(void)
{
	EXPECT("outside a mode the mode reads 0", mode_of(0) == 0);
	EXPECT("PFS mode is set", setweight(0, PROCESS_PFS, 900) == 0);
	EXPECT("the mode reads PFS", mode_of(0) == SCHED_WEIGHT_MODE_PFS);
	EXPECT("the process weight reads 900", getweight(0, SCHED_WEIGHT_PROCESS) == 900);
	EXPECT("a lone runnable thread weighs the process weight", getweight(0, 0) == 900);
	EXPECT_ERR("a thread-scope weight in a mode is EBUSY", setweight(0, 0, 500), EBUSY);
	EXPECT_ERR("a thread-scope reset in a mode is EBUSY", setweight(gettid(), 0, 0), EBUSY);
	setpriority(PRIO_PROCESS, 0, 5);
	EXPECT("setpriority keeps the mode and its weight",
	       mode_of(0) == SCHED_WEIGHT_MODE_PFS && getweight(0, 0) == 900);
	setpriority(PRIO_PROCESS, 0, 0);
	EXPECT("TWRS replaces PFS", setweight(0, PROCESS_TWRS, 1000) == 0 &&
	       mode_of(0) == SCHED_WEIGHT_MODE_TWRS && getweight(0, SCHED_WEIGHT_PROCESS) == 1000);
	EXPECT("weight 0 with a mode flag ends the mode", setweight(0, PROCESS_TWRS, 0) == 0 &&
	       mode_of(0) == 0 && getweight(0, 0) == 1024);
	setweight(0, PROCESS_PFS, 900);
	EXPECT("a process-scope weight replaces the mode", setweight(0, SCHED_WEIGHT_PROCESS, 700) == 0 &&
	       mode_of(0) == 0 && getweight(0, 0) == 700 && getweight(0, SCHED_WEIGHT_PROCESS) == 700);
	setweight(0, PROCESS_PFS, 900);
	EXPECT("a process-scope reset ends the mode", setweight(0, SCHED_WEIGHT_PROCESS, 0) == 0 &&
	       mode_of(0) == 0 && getweight(0, 0) == 1024);
}

struct probe {
	long weight, busy;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *probe_thread(void *arg)
{
	struct probe *p = arg;
	double until = now() + 0.1;

	/* Run for some ticks, by when the creator waits in pthread_join(). */
	while (now() < until)
		;
	p->weight = getweight(0, 0);
	errno = 0;
	p->busy = setweight(0, 0, 100) == -1 && errno == EBUSY;
	return NULL;
}

static void inheritance(char *self)
{
	struct probe pr = { 0, 0 };
	pthread_t t;
	pid_t child;
	int status = -1;

	setweight(0, PROCESS_PFS, 600);
	pthread_create(&t, NULL, probe_thread, &pr);
	pthread_join(t, NULL);
	EXPECT("a new thread joins the mode (alone runnable: the process weight)",
	       pr.weight == 600 && pr.busy);

	child = fork();
	if (child == 0)
		_exit(mode_of(0) == 0 && getweight(0, 0) == 1024 ? 0 : 1);
	waitpid(child, &status, 0);
	EXPECT("a new process starts outside the mode, at its nice weight",
	       WIFEXITED(status) && WEXITSTATUS(status) == 0);
	setweight(0, SCHED_WEIGHT_PROCESS, 0);

	child = fork();
	if (child == 0) {
		char *argv[] = { self, "--check-mode", NULL };

		setweight(0, PROCESS_TWRS, 700);
		execv("/proc/self/exe", argv);
		_exit(9);
	}
	waitpid(child, &status, 0);
	EXPECT("exec keeps the mode and the process weight",
	       WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* An unprivileged user: bits of the exit code name what went wrong. */
static int unprivileged(void)
{
	int bad = 0;

	if (setgid(65534) || setuid(65534))
		return 255;
	errno = 0;
	if (setweight(0, PROCESS_TWRS, 1024) != -1 || errno != EPERM)
		bad |= 1;	/* TWRS weights have no bound */
	if (setweight(0, PROCESS_PFS, 2048) != -1 || errno != EPERM)
		bad |= 2;	/* above the threads' weight */
	if (setweight(0, PROCESS_PFS, 512) != 0)
		bad |= 4;	/* lowering is allowed */
	if (setweight(0, PROCESS_PFS, 1024) != -1 || errno != EPERM)
		bad |= 8;	/* and cannot be undone */
	if (setweight(0, SCHED_WEIGHT_PROCESS, 0) != -1 || errno != EPERM)
		bad |= 16;	/* nor by a reset to nice 0's 1024 */
	if (setweight(1, PROCESS_PFS, 100) != -1 || errno != EPERM)
		bad |= 32;	/* nor can root's process be touched */
	return bad;
}

/* Put in TWRS by root first: lowering stays allowed, raising does not. */
static int unprivileged_in_twrs(void)
{
	int bad = 0;

	if (setweight(0, PROCESS_TWRS, 1024) || setgid(65534) || setuid(65534))
		return 255;
	errno = 0;
	if (setweight(0, PROCESS_TWRS, 512) != 0)
		bad |= 1;
	if (setweight(0, PROCESS_TWRS, 2048) != -1 || errno != EPERM)
		bad |= 2;
	if (setweight(0, PROCESS_PFS, 512) != 0)
		bad |= 4;	/* from TWRS to PFS lowers the bound */
	if (setweight(0, PROCESS_TWRS, 512) != -1 || errno != EPERM)
		bad |= 8;	/* and back is a raise */
	return bad;
}

static void *sleeper(void *arg)
{
	for (;;)
		pause();	/* setuid()'s signal to every thread returns here */
	return NULL;
}

/* Four threads (three asleep), put in a mode by root, then uid 65534. */
static int four_threads_unprivileged_in(unsigned int flags, unsigned int weight)
{
	pthread_t t;
	int i;

	for (i = 0; i < 3; i++)
		if (pthread_create(&t, NULL, sleeper, NULL))
			return -1;
	if (setweight(0, flags, weight) || setgid(65534) || setuid(65534))
		return -1;
	errno = 0;
	return 0;
}

/*
 * Leaving a mode gives every thread a weight of its own: without
 * CAP_SYS_NICE the process may not weigh more in all than the mode gave it.
 */
static int unprivileged_leaving_pfs(void)
{
	int bad = 0;

	if (four_threads_unprivileged_in(PROCESS_PFS, 1024))
		return 255;
	if (setweight(0, SCHED_WEIGHT_PROCESS, 0) != -1 || errno != EPERM)
		bad |= 1;	/* nice 0's 1024 each: 4096 in all */
	if (setweight(0, SCHED_WEIGHT_PROCESS, 512) != -1 || errno != EPERM)
		bad |= 2;	/* 2048 in all */
	if (mode_of(0) != SCHED_WEIGHT_MODE_PFS || getweight(0, SCHED_WEIGHT_PROCESS) != 1024)
		bad |= 4;	/* refused calls change nothing */
	if (setweight(0, SCHED_WEIGHT_PROCESS, 256) != 0)
		bad |= 8;	/* 1024 in all: allowed */
	if (mode_of(0) != 0 || getweight(0, 0) != 256)
		bad |= 16;
	return bad;
}

/* TWRS weighs each thread at least the process weight: so may it after. */
static int unprivileged_leaving_twrs(void)
{
	int bad = 0;

	if (four_threads_unprivileged_in(PROCESS_TWRS, 300))
		return 255;
	if (setweight(0, SCHED_WEIGHT_PROCESS, 0) != -1 || errno != EPERM)
		bad |= 1;	/* nice 0's 1024 each, above 300 */
	if (setweight(0, SCHED_WEIGHT_PROCESS, 301) != -1 || errno != EPERM)
		bad |= 2;
	if (setweight(0, SCHED_WEIGHT_PROCESS, 300) != 0)
		bad |= 4;
	if (mode_of(0) != 0 || getweight(0, 0) != 300)
		bad |= 8;
	return bad;
}

static void permissions(void)
{
	int (*cases[4])(void) = {
		unprivileged, unprivileged_in_twrs, unprivileged_leaving_pfs, unprivileged_leaving_twrs
	};
	const char *names[4] = {
		"an unprivileged user may lower a mode's reach but not raise it, nor enter TWRS",
		"an unprivileged process in TWRS may lower its weight, not raise it",
		"an unprivileged process leaving PFS may not weigh more in all than its PFS weight",
		"an unprivileged process leaving TWRS may not give a thread more than the TWRS weight",
	};
	int i;

	for (i = 0; i < 4; i++) {
		char why[64];
		int status = -1;
		pid_t child = fork();

		if (child == 0)
			_exit(cases[i]());
		waitpid(child, &status, 0);
		snprintf(why, sizeof(why), "exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		report(WIFEXITED(status) && WEXITSTATUS(status) == 0, names[i], why);
	}
}

/* PFS: each runnable thread weighs the process weight / its runnable threads. */
static void pfs_weights(void)
{
	struct gang g = gang_start(3, PROCESS_PFS, 900);
	char name[128];
	long got = 0;
	int ok;

	ok = gang_weighs(&g, 300, &got);
	snprintf(name, sizeof(name), "PFS 900 over 3 runnable threads: 300 each (got %ld)", got);
	report(ok, name, "weights differ");
	gang_add(&g, 1);
	ok = gang_weighs(&g, 225, &got);
	snprintf(name, sizeof(name), "a 4th thread: 225 each (got %ld)", got);
	report(ok, name, "weights differ");
	gang_stop(&g, 2);
	ok = gang_weighs(&g, 450, &got);
	snprintf(name, sizeof(name), "two threads stop: 450 each (got %ld)", got);
	report(ok, name, "weights differ");
	gang_end(&g);
}

static int near(double got, double want)
{
	return got > want - 2 && got < want + 2;
}

/* PFS shares: a 1-thread and an 8-thread process get half each, and keep it. */
static void pfs_shares(void)
{
	struct gang g[2] = { gang_start(1, PROCESS_PFS, 1024), gang_start(8, PROCESS_PFS, 1024) };
	char name[160];
	double s[2];

	sleep(1);
	shares(g, 2, 3, s);
	snprintf(name, sizeof(name), "PFS, 1 vs 8 threads on one CPU: %.1f%% / %.1f%%, want 50 ± 2", s[0], s[1]);
	report(near(s[0], 50), name, "unfair");
	gang_add(&g[1], 8);
	sleep(1);
	shares(g, 2, 3, s);
	snprintf(name, sizeof(name), "PFS follows 8 new threads (1 vs 16): %.1f%% / %.1f%%", s[0], s[1]);
	report(near(s[0], 50), name, "unfair");
	gang_stop(&g[1], 12);
	sleep(1);
	shares(g, 2, 3, s);
	snprintf(name, sizeof(name), "PFS follows 12 threads ending (1 vs 4): %.1f%% / %.1f%%", s[0], s[1]);
	report(near(s[0], 50), name, "unfair");
	gang_end(&g[0]);
	gang_end(&g[1]);

	/* The same with weights set once per thread, as ABI 1 could: stale. */
	g[0] = gang_start(1, 0, 0);
	g[1] = gang_start(8, 0, 0);
	sleep(1);
	setweight(g[1].pid, SCHED_WEIGHT_PROCESS, 128);
	gang_add(&g[1], 8);
	sleep(1);
	shares(g, 2, 3, s);
	snprintf(name, sizeof(name), "set once per thread instead, 8 new threads take over: %.1f%% / %.1f%%", s[0], s[1]);
	report(s[0] < 40, name, "the contrast did not show");
	gang_end(&g[0]);
	gang_end(&g[1]);
}

/*
 * TWRS (000 eq. 3.3): processes A (1 thread) and B (3 threads) in TWRS 1024
 * beside C (2 threads, stock) on one CPU, 6 runnable threads: A's thread
 * weighs 1024 × (6 − 1) = 5120, B's 1024 × (6 − 3) = 3072, C's 1024. Shares
 * follow: A 5120/16384 = 31.25 %, B 56.25 %, C 12.5 %.
 */
static void twrs(void)
{
	struct gang g[3] = {
		gang_start(1, PROCESS_TWRS, 1024), gang_start(3, PROCESS_TWRS, 1024), gang_start(2, 0, 0)
	};
	char name[160];
	long a = 0, b = 0;
	double s[3];
	int ok;

	ok = gang_weighs(&g[0], 5120, &a);
	ok = gang_weighs(&g[1], 3072, &b) && ok;
	snprintf(name, sizeof(name), "TWRS thread weights follow eq. 3.3: 5120 and 3072 (got %ld, %ld)", a, b);
	report(ok, name, "weights differ");
	shares(g, 3, 3, s);
	snprintf(name, sizeof(name), "TWRS shares 1/3/2 threads: %.1f%% %.1f%% %.1f%%, want 31.25 56.25 12.5 ± 2",
		 s[0], s[1], s[2]);
	report(near(s[0], 31.25) && near(s[1], 56.25) && near(s[2], 12.5), name, "off");
	gang_stop(&g[1], 2);
	ok = gang_weighs(&g[0], 3072, &a);
	ok = gang_weighs(&g[1], 3072, &b) && ok;
	snprintf(name, sizeof(name), "two of B's threads end: 4 runnable, A and B weigh 3072 (got %ld, %ld)", a, b);
	report(ok, name, "weights differ");
	gang_end(&g[0]);
	gang_end(&g[1]);
	gang_end(&g[2]);
}

/* Writes s to a cgroup file below /sys/fs/cgroup. */
static int cgroup_write(const char *file, const char *s)
{
	char path[128];
	int fd, ok;

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

static int cgroup_enter(const char *cgroup, pid_t pid)
{
	char file[64], s[16];

	snprintf(file, sizeof(file), "%s/cgroup.procs", cgroup);
	snprintf(s, sizeof(s), "%d", pid);
	return cgroup_write(file, s);
}

/*
 * TWRS counts the threads a thread competes with in its own run queue, its
 * cgroup's on the CPU: a pod's processes are weighed against each other,
 * not against other pods' threads, which compete through the cgroups'
 * weights above. Processes A (1 thread) and B (3 threads) in TWRS 1024 in
 * cgroup "pod", beside a sibling cgroup "other" of 4 stock spinners of the
 * same cgroup weight, all on CPU 0: in "pod" 4 threads are runnable, so A's
 * thread weighs 1024 x (4 - 1) = 3072 and B's 1024 x (4 - 3) = 1024 each;
 * A and B split "pod"'s half of the CPU 50/50 (25 % each), "other" gets
 * 50 %. Counting the whole CPU's 8 runnable tasks instead would give 7168
 * and 5120: A 15.9 %, B 34.1 %.
 */
static void twrs_in_cgroups(void)
{
	struct gang g[3];
	char name[200];
	long a = 0, b = 0;
	double s[3];
	int ok;

	mkdir("/sys/fs/cgroup", 0755);
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL) && errno != EBUSY) {
		report(0, "TWRS in cgroups", "cannot mount cgroup2");
		return;
	}
	if (cgroup_write("cgroup.subtree_control", "+cpu") ||
	    (mkdir("/sys/fs/cgroup/pod", 0755) && errno != EEXIST) ||
	    (mkdir("/sys/fs/cgroup/other", 0755) && errno != EEXIST)) {
		report(0, "TWRS in cgroups", "cannot create the cgroups");
		return;
	}
	g[0] = gang_start(1, PROCESS_TWRS, 1024);
	g[1] = gang_start(3, PROCESS_TWRS, 1024);
	g[2] = gang_start(4, 0, 0);
	ok = !cgroup_enter("pod", g[0].pid) && !cgroup_enter("pod", g[1].pid) &&
	     !cgroup_enter("other", g[2].pid);
	report(ok, "the gangs enter their cgroups", strerror(errno));
	ok = gang_weighs(&g[0], 3072, &a);
	ok = gang_weighs(&g[1], 1024, &b) && ok;
	snprintf(name, sizeof(name),
		 "TWRS in a cgroup counts its own run queue: 3072 and 1024 (got %ld, %ld)", a, b);
	report(ok, name, "weights differ");
	sleep(1);
	shares(g, 3, 3, s);
	snprintf(name, sizeof(name),
		 "TWRS in a cgroup beside another: %.1f%% %.1f%% %.1f%%, want 25 25 50 +- 2", s[0], s[1], s[2]);
	report(near(s[0], 25) && near(s[1], 25) && near(s[2], 50), name, "off");
	gang_end(&g[0]);
	gang_end(&g[1]);
	gang_end(&g[2]);
	rmdir("/sys/fs/cgroup/pod");
	rmdir("/sys/fs/cgroup/other");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--check-mode"))
		return mode_of(0) == SCHED_WEIGHT_MODE_TWRS && getweight(0, SCHED_WEIGHT_PROCESS) == 700 ? 0 : 1;

	printf("TAP version 13\n");
	if (probe_abi() < 2) {
		report(0, "ABI 2", "the probe does not read 2");
		goto out;
	}
	pin(1);
	errors();
	set_get_reset();
	inheritance(argv[0]);
	permissions();
	pfs_weights();
	pfs_shares();
	twrs();
	twrs_in_cgroups();
out:
	printf("1..%d\n# %d failed\n", tests, failures);
	return failures ? 1 : 0;
}
