/* ebb-cflags: -mred-zone */
/* Issue 18: an interrupt during code that uses the red zone corrupts
 * nothing. Built with the red zone (the line above undoes musl's
 * -mno-red-zone for this program): a leaf function keeps its locals in
 * the 128 bytes below rsp without moving rsp (psABI §3.2.2) and checks
 * them over and over for 300 ms, while the timer interrupts (natively
 * every 10 ms, on their own stack) and, hosted, Linux's scheduler come
 * and go. Had an interrupt pushed its frame at rsp, it would have
 * overwritten them. */
#include <stdint.h>
#include <time.h>

#include "report.h"

enum { WORDS = 12 };

static uint64_t pattern(int i)
{
	return 0x0123456789abcdefULL * (uint64_t)(i + 1);
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A leaf (it calls nothing), so its locals sit in the red zone. Returns
 * how many times a local did not hold its pattern. */
static __attribute__((noinline)) long check_red_zone(long rounds)
{
	volatile uint64_t zone[WORDS];
	long bad = 0;
	for (int i = 0; i < WORDS; i++)
		zone[i] = pattern(i);
	for (long round = 0; round < rounds; round++)
		for (int i = 0; i < WORDS; i++)
			if (zone[i] != 0x0123456789abcdefULL * (uint64_t)(i + 1))
				bad++;
	return bad;
}

int main(void)
{
	long bad = 0, calls = 0;
	int64_t end = now_ns() + 300000000;
	while (now_ns() < end) {
		bad += check_red_zone(100000);
		calls++;
	}
	check("redzone", "the checks ran", calls > 0);
	check("redzone", "every local in the red zone kept its value", bad == 0);
	return report_exit();
}
