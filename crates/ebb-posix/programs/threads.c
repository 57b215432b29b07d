/* Issue 18, threads group: pthread_create and join (clone), mutexes and
 * condition variables (futex), thread-local storage (the FS base),
 * pthread_once, a detached thread that unmaps its own stack, sched_yield
 * and sched_getaffinity; every result checked. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "report.h"

enum { THREADS = 4, INCREMENTS = 100000, ITEMS = 1000, SLOTS = 4 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static __thread long mine = -1;
static int tls_kept[THREADS];

static void *count(void *arg)
{
	long index = (long)(intptr_t)arg;
	mine = index * 10;
	for (int i = 0; i < INCREMENTS; i++) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
		if (i % 1000 == 0)
			sched_yield();
	}
	tls_kept[index] = mine == index * 10;
	return (void *)(intptr_t)(index + 100);
}

/* A bounded queue between one producer and one consumer. */
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static int queue[SLOTS], queued, head;

static void *produce(void *unused)
{
	(void)unused;
	for (int item = 1; item <= ITEMS; item++) {
		pthread_mutex_lock(&lock);
		while (queued == SLOTS)
			pthread_cond_wait(&not_full, &lock);
		queue[(head + queued++) % SLOTS] = item;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void *consume(void *sum)
{
	for (int taken = 0; taken < ITEMS; taken++) {
		pthread_mutex_lock(&lock);
		while (queued == 0)
			pthread_cond_wait(&not_empty, &lock);
		*(long *)sum += queue[head];
		head = (head + 1) % SLOTS;
		queued--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_runs;
static void run_once(void) { once_runs++; }
static void *call_once(void *unused) { (void)unused; pthread_once(&once, run_once); return NULL; }

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int detached_done;

static void *detached(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&done_lock);
	detached_done = 1;
	pthread_cond_signal(&done_cond);
	pthread_mutex_unlock(&done_lock);
	return NULL; /* musl unmaps a detached thread's stack as it exits */
}

int main(void)
{
	pthread_t threads[THREADS];
	int created = 1, joined = 1;
	mine = 99;
	for (long i = 0; i < THREADS; i++)
		created &= pthread_create(&threads[i], NULL, count, (void *)(intptr_t)i) == 0;
	for (long i = 0; i < THREADS; i++) {
		void *result = NULL;
		joined &= pthread_join(threads[i], &result) == 0 && result == (void *)(intptr_t)(i + 100);
	}
	check("threads", "4 threads created", created);
	check("threads", "each joined with its result", joined);
	check("threads", "the mutex kept 400000 increments", counter == (long)THREADS * INCREMENTS);
	int all_kept = 1;
	for (int i = 0; i < THREADS; i++)
		all_kept &= tls_kept[i];
	check("threads", "each thread kept its own thread-local value", all_kept);
	check("threads", "the main thread's thread-local value is its own", mine == 99);

	long sum = 0;
	pthread_t producer, consumer;
	int queue_started = pthread_create(&producer, NULL, produce, NULL) == 0;
	queue_started = queue_started && pthread_create(&consumer, NULL, consume, &sum) == 0;
	check("threads", "a producer and a consumer", queue_started);
	if (!queue_started)
		return report_exit();
	pthread_join(producer, NULL);
	pthread_join(consumer, NULL);
	check("threads", "a condition-variable queue passed 1000 items in order", sum == (long)ITEMS * (ITEMS + 1) / 2);

	pthread_t callers[3];
	int callers_started = 1;
	for (int i = 0; i < 3; i++)
		callers_started &= pthread_create(&callers[i], NULL, call_once, NULL) == 0;
	check("threads", "three pthread_once callers", callers_started);
	if (!callers_started)
		return report_exit();
	for (int i = 0; i < 3; i++)
		pthread_join(callers[i], NULL);
	check("threads", "pthread_once ran once", once_runs == 1);

	pthread_attr_t attributes;
	pthread_t loose;
	pthread_attr_init(&attributes);
	pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
	check("threads", "a detached thread", pthread_create(&loose, &attributes, detached, NULL) == 0);
	pthread_mutex_lock(&done_lock);
	while (!detached_done)
		pthread_cond_wait(&done_cond, &done_lock);
	pthread_mutex_unlock(&done_lock);
	check("threads", "the detached thread ran", detached_done);
	/* Time for it to finish exiting, which unmaps its own stack
	 * (__unmapself), before the process ends: a broken unmap crashes the
	 * program here rather than going unseen under exit_group. */
	struct timespec settle = {0, 50000000};
	nanosleep(&settle, NULL);

	check("threads", "sched_yield", sched_yield() == 0);
	cpu_set_t cpus;
	CPU_ZERO(&cpus);
	check("threads", "sched_getaffinity", sched_getaffinity(0, sizeof cpus, &cpus) == 0);
	check("threads", "at least one cpu", CPU_COUNT(&cpus) >= 1);
	return report_exit();
}
