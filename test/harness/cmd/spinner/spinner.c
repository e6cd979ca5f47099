/*
 * spinner: a process of exactly -threads spinning threads, and with
 * -children one more such process per entry, in the burner image beside
 * the Go burner. A Go process also runs the runtime's own threads (sysmon
 * wakes every 10 ms and, in a busy guest, waits for a CPU most of the
 * time), which the kernel's thread-aware modes count as runnable; these
 * processes run nothing but their spinners, so a thread policy's parts
 * are those of their -threads (docs/guest-node.md).
 *
 *   spinner -threads N [-children A,B,...]
 *
 * Each child is this program again with -threads A (the command line
 * tells the processes apart); it is killed when its parent ends.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void usage(void)
{
	fprintf(stderr, "spinner: want -threads N (N >= 1) [-children A,B,... (each >= 1)]\n");
	exit(2);
}

/* count parses a thread count (1 to 100000) at s; *end is where it stopped. */
static long count(const char *s, char **end)
{
	long n;

	errno = 0;
	n = strtol(s, end, 10);
	if (errno || *end == s || n < 1 || n > 100000)
		usage();
	return n;
}

static void *spin(void *unused)
{
	volatile uint64_t x = 1;

	for (;;)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return unused;
}

/* start runs this program again with -threads n, to die with its parent. */
static void start(const char *self, long n)
{
	pid_t parent = getpid();
	char arg[24];
	pid_t pid;

	snprintf(arg, sizeof(arg), "%ld", n);
	pid = fork();

	if (pid < 0) {
		perror("spinner: fork");
		exit(1);
	}
	if (pid > 0)
		return;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(1);
	execl("/proc/self/exe", self, "-threads", arg, (char *)NULL);
	perror("spinner: exec");
	_exit(1);
}

/* stop ends the process on SIGTERM, which a container's PID 1 would ignore. */
static void stop(int sig)
{
	_exit(0);
}

int main(int argc, char **argv)
{
	long threads = 0;
	char *children = "";
	char *end;
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-threads")) {
			threads = count(argv[i + 1], &end);
			if (*end)
				usage();
		} else if (!strcmp(argv[i], "-children")) {
			children = argv[i + 1];
			for (char *p = children; *p; p = end + (*end == ',')) {
				count(p, &end);
				if (*end && *end != ',')
					usage();
			}
		} else {
			usage();
		}
	}
	if (i != argc || threads < 1)
		usage();
	signal(SIGTERM, stop);
	signal(SIGINT, stop);
	for (char *p = children; *p; p = end + (*end == ','))
		start(argv[0], count(p, &end));
	for (long t = 1; t < threads; t++) {
		pthread_t id;
		int err = pthread_create(&id, NULL, spin, NULL);

		if (err) {
			fprintf(stderr, "spinner: thread %ld: %s\n", t, strerror(err));
			return 1;
		}
	}
	spin(NULL);
}
