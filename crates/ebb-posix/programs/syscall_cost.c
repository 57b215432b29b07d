/* Issue 18, benchmark: the cost of a trivial system call, getpid, made
 * through syscall(2) so that no C library can answer it from a cache.
 * Times CALLS calls (default 200000) on CLOCK_MONOTONIC after 1000 to
 * warm up, and prints "syscall_cost: getpid NS ns over CALLS calls" (NS
 * with one decimal). `./ebb bench sqlite` runs it natively, hosted and
 * in the Linux guest, in the same run. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	long calls = 200000;
	if (argc > 1) {
		char *end;
		calls = strtol(argv[1], &end, 10);
		if (*end != 0 || calls < 1 || calls > 100000000) {
			fprintf(stderr, "usage: syscall_cost [CALLS: 1..1e8]\n");
			return 2;
		}
	}
	long sum = 0;
	for (int i = 0; i < 1000; i++)
		sum += syscall(SYS_getpid);
	double start = now_ns();
	for (long i = 0; i < calls; i++)
		sum += syscall(SYS_getpid);
	double elapsed = now_ns() - start;
	if (sum <= 0) {
		fprintf(stderr, "syscall_cost: getpid answered %ld\n", sum);
		return 1;
	}
	printf("syscall_cost: getpid %.1f ns over %ld calls\n", elapsed / (double)calls, calls);
	return 0;
}
