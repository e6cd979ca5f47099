/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest programs share: the sched_setweight() ABI (numbers and
 * flags, include/uapi/linux/sched_weight.h in the patched tree), the ABI
 * probe, and TAP reporting.
 */
#ifndef KUBEFAIR_WEIGHT_H
#define KUBEFAIR_WEIGHT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NR_sched_setweight 463
#define NR_sched_getweight 464
#define SCHED_WEIGHT_PROCESS 0x1
#define SCHED_WEIGHT_MODE_PFS 0x2
#define SCHED_WEIGHT_MODE_TWRS 0x4
#define SCHED_WEIGHT_GET_MODE 0x8
#define PROCESS_PFS (SCHED_WEIGHT_PROCESS | SCHED_WEIGHT_MODE_PFS)
#define PROCESS_TWRS (SCHED_WEIGHT_PROCESS | SCHED_WEIGHT_MODE_TWRS)

static inline long setweight(pid_t pid, unsigned int flags, unsigned int weight)
{
	return syscall(NR_sched_setweight, pid, flags, weight);
}

static inline long getweight(pid_t pid, unsigned int flags)
{
	return syscall(NR_sched_getweight, pid, flags);
}

static int tests, failures;


static inline void report(int ok, const char *name, const char *why)
{
	tests++;
	if (ok) {
		printf("ok %d %s\n", tests, name);
	} else {
		failures++;
		printf("not ok %d %s # %s\n", tests, name, why);
	}
	fflush(stdout);
}

#define EXPECT(name, cond) do {						\
	char why_[160];							\
	snprintf(why_, sizeof(why_), "%s (errno %d %s)", #cond,		\
		 errno, strerror(errno));				\
	report((cond), name, why_);					\
} while (0)

#define EXPECT_ERR(name, call, err) do {				\
	long r_; errno = 0; r_ = (call);				\
	char why_[160];							\
	snprintf(why_, sizeof(why_), "%s = %ld errno %d, want -1 %s",	\
		 #call, r_, errno, #err);				\
	report(r_ == -1 && errno == (err), name, why_);			\
} while (0)

static inline int probe_abi(void)
{
	FILE *f = fopen("/proc/sys/kernel/sched_weight_abi", "r");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

#endif /* KUBEFAIR_WEIGHT_H */
