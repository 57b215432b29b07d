/* Issue 18, time group: clock_gettime, clock_getres, gettimeofday, time,
 * nanosleep, clock_nanosleep (relative and absolute). */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "report.h"

static int64_t ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t monotonic_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return ns(now);
}

int main(void)
{
	int64_t previous = monotonic_ns(), backwards = 0;
	for (int i = 0; i < 1000; i++) {
		int64_t now = monotonic_ns();
		backwards |= now < previous;
		previous = now;
	}
	check("time", "CLOCK_MONOTONIC never goes backwards", !backwards);

	struct timespec real;
	struct timeval tv;
	check("time", "clock_gettime CLOCK_REALTIME", clock_gettime(CLOCK_REALTIME, &real) == 0);
	check("time", "gettimeofday", gettimeofday(&tv, NULL) == 0);
	check("time", "the real time is after 2024", real.tv_sec > 1704067200);
	int64_t apart = (int64_t)tv.tv_sec - real.tv_sec;
	check("time", "gettimeofday agrees with CLOCK_REALTIME", apart >= 0 && apart <= 1);
	apart = (int64_t)time(NULL) - real.tv_sec;
	check("time", "time agrees with CLOCK_REALTIME", apart >= 0 && apart <= 1);

	struct timespec resolution;
	check("time", "clock_getres CLOCK_MONOTONIC", clock_getres(CLOCK_MONOTONIC, &resolution) == 0);
	check("time", "the resolution is 1 ms or finer", ns(resolution) > 0 && ns(resolution) <= 1000000);

	int64_t before = monotonic_ns();
	struct timespec twenty_ms = {0, 20000000};
	check("time", "nanosleep 20 ms", nanosleep(&twenty_ms, NULL) == 0);
	check("time", "nanosleep slept at least 20 ms", monotonic_ns() - before >= 20000000);

	before = monotonic_ns();
	struct timespec ten_ms = {0, 10000000};
	check("time", "clock_nanosleep 10 ms", clock_nanosleep(CLOCK_MONOTONIC, 0, &ten_ms, NULL) == 0);
	check("time", "clock_nanosleep slept at least 10 ms", monotonic_ns() - before >= 10000000);

	int64_t target = monotonic_ns() + 10000000;
	struct timespec until = {target / 1000000000, target % 1000000000};
	check("time", "clock_nanosleep until an absolute time",
	      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == 0);
	check("time", "it woke at or after that time", monotonic_ns() >= target);

	/* The errors: C library functions that return the error number. */
	struct timespec bad = {0, 2000000000};
	check_errno("time", "nanosleep of 2e9 ns", nanosleep(&bad, NULL), EINVAL);
	check("time", "clock_nanosleep of 2e9 ns is EINVAL",
	      clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL) == EINVAL);
	check_errno("time", "clock_gettime of clock 9999", clock_gettime((clockid_t)9999, &real), EINVAL);
	struct timespec short_wait = {0, 1000};
	check("time", "clock_nanosleep on a coarse clock is EOPNOTSUPP",
	      clock_nanosleep(CLOCK_MONOTONIC_COARSE, 0, &short_wait, NULL) == EOPNOTSUPP);
	return report_exit();
}
