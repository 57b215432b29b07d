/*
 * sqlite-kv: a key-value load on SQLite in the shape of the in-kernel
 * execution framework's LevelDB experiment (issue 18), YCSB-like: a table
 * of RECORDS keys with 100-byte values, then RUNS runs of OPERATIONS
 * operations each, reads and updates in the proportion MIX, on keys drawn
 * from a Zipf distribution (exponent 1: the weight of the key of rank i is
 * 1/i, computed with integers so that every C library draws the same
 * keys), each operation its own transaction as a key-value store's put
 * is. It prints each run's time and, at the end, a checksum over every row
 * and one over every value read: the same on every platform for the same
 * arguments, whatever the timings.
 *
 * usage: sqlite-kv [--records N] [--operations N] [--runs N]
 *                  [--reads PERCENT] DATABASE
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sqlite3.h"

enum { VALUE_BYTES = 100 };

static void die(sqlite3 *db, const char *what)
{
	fprintf(stderr, "sqlite-kv: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
	exit(1);
}

/* splitmix64 (Steele, Lea, Flood 2014): a seeded, portable stream. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* FNV-1a, 64 bits. */
static uint64_t fnv(uint64_t hash, const void *bytes, size_t len)
{
	const unsigned char *p = bytes;
	for (size_t i = 0; i < len; i++)
		hash = (hash ^ p[i]) * 0x100000001b3ULL;
	return hash;
}

/* The value a key holds after write number `version` of it. */
static void value_of(int64_t key, uint64_t version, unsigned char *out)
{
	uint64_t state = (uint64_t)key * 0x100000001b3ULL ^ version;
	for (int i = 0; i < VALUE_BYTES; i += 8) {
		uint64_t word = next_random(&state);
		memcpy(out + i, &word, VALUE_BYTES - i < 8 ? VALUE_BYTES - i : 8);
	}
}

/* Cumulative Zipf weights: weight of rank i (1-based) is 2^40 / i. */
static uint64_t *zipf_table(int64_t records)
{
	uint64_t *cumulative = malloc(sizeof *cumulative * (size_t)records);
	if (!cumulative)
		die(NULL, "the Zipf table");
	uint64_t total = 0;
	for (int64_t i = 0; i < records; i++) {
		total += (1ULL << 40) / (uint64_t)(i + 1);
		cumulative[i] = total;
	}
	return cumulative;
}

/* A key drawn from the table: ranks are scattered over the key space by
 * a fixed permutation, so the hot keys are not neighbours. */
static int64_t zipf_key(const uint64_t *cumulative, int64_t records, uint64_t *state)
{
	uint64_t target = next_random(state) % cumulative[records - 1];
	int64_t low = 0, high = records - 1;
	while (low < high) {
		int64_t mid = low + (high - low) / 2;
		if (cumulative[mid] > target)
			high = mid;
		else
			low = mid + 1;
	}
	return (int64_t)(((uint64_t)low * 2654435761ULL) % (uint64_t)records);
}

/* A whole number from `text` in [min, max], or -1 (all the options are
 * counts, never negative). */
static long long number(const char *text, long long min, long long max)
{
	char *end;
	long long value = strtoll(text, &end, 10);
	if (end == text || *end != 0 || value < min || value > max)
		return -1;
	return value;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void exec(sqlite3 *db, const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		die(db, sql);
}

int main(int argc, char **argv)
{
	long long records = 10000, operations = 100000, runs = 20, reads = 50;
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--records") == 0)
			records = number(argv[++i], 1, 100000000);
		else if (i + 1 < argc && strcmp(argv[i], "--operations") == 0)
			operations = number(argv[++i], 0, 1000000000);
		else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0)
			runs = number(argv[++i], 1, 1000000);
		else if (i + 1 < argc && strcmp(argv[i], "--reads") == 0)
			reads = number(argv[++i], 0, 100);
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else {
			fprintf(stderr, "sqlite-kv: unknown argument %s\n", argv[i]);
			path = NULL;
			break;
		}
	}
	if (!path || records < 1 || operations < 0 || runs < 1 || reads < 0) {
		fprintf(stderr, "usage: sqlite-kv [--records 1..1e8] [--operations 0..1e9] [--runs 1..1e6] [--reads 0..100] DATABASE\n");
		return 2;
	}
	sqlite3 *db;
	if (sqlite3_open(path, &db) != SQLITE_OK)
		die(db, "opening the database");
	exec(db, "DROP TABLE IF EXISTS kv; CREATE TABLE kv(key INTEGER PRIMARY KEY, value BLOB NOT NULL)");

	sqlite3_stmt *insert, *select, *update;
	if (sqlite3_prepare_v2(db, "INSERT INTO kv VALUES(?1, ?2)", -1, &insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT value FROM kv WHERE key = ?1", -1, &select, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "UPDATE kv SET value = ?2 WHERE key = ?1", -1, &update, NULL) != SQLITE_OK)
		die(db, "preparing the statements");
	unsigned char value[VALUE_BYTES];
	exec(db, "BEGIN");
	for (long long key = 0; key < records; key++) {
		value_of(key, 0, value);
		sqlite3_bind_int64(insert, 1, key);
		sqlite3_bind_blob(insert, 2, value, VALUE_BYTES, SQLITE_STATIC);
		if (sqlite3_step(insert) != SQLITE_DONE)
			die(db, "loading");
		sqlite3_reset(insert);
	}
	exec(db, "COMMIT");
	printf("sqlite-kv: %lld records, %lld runs of %lld operations, %lld%% reads\n",
	       records, runs, operations, reads);

	uint64_t *cumulative = zipf_table(records);
	uint64_t state = 42, read_sum = 0xcbf29ce484222325ULL, version = 0;
	for (long long run = 1; run <= runs; run++) {
		double start = now_ms();
		for (long long op = 0; op < operations; op++) {
			int64_t key = zipf_key(cumulative, records, &state);
			int is_read = (int)(next_random(&state) % 100) < reads;
			if (is_read) {
				sqlite3_bind_int64(select, 1, key);
				if (sqlite3_step(select) != SQLITE_ROW)
					die(db, "reading");
				read_sum = fnv(read_sum, sqlite3_column_blob(select, 0), (size_t)sqlite3_column_bytes(select, 0));
				sqlite3_reset(select);
			} else {
				value_of(key, ++version, value);
				sqlite3_bind_int64(update, 1, key);
				sqlite3_bind_blob(update, 2, value, VALUE_BYTES, SQLITE_STATIC);
				if (sqlite3_step(update) != SQLITE_DONE)
					die(db, "updating");
				sqlite3_reset(update);
			}
		}
		printf("run %lld: %.3f ms\n", run, now_ms() - start);
	}

	sqlite3_stmt *all;
	if (sqlite3_prepare_v2(db, "SELECT key, value FROM kv ORDER BY key", -1, &all, NULL) != SQLITE_OK)
		die(db, "preparing the checksum");
	uint64_t table_sum = 0xcbf29ce484222325ULL;
	int64_t rows = 0;
	while (sqlite3_step(all) == SQLITE_ROW) {
		int64_t key = sqlite3_column_int64(all, 0);
		table_sum = fnv(table_sum, &key, sizeof key);
		table_sum = fnv(table_sum, sqlite3_column_blob(all, 1), (size_t)sqlite3_column_bytes(all, 1));
		rows++;
	}
	printf("sqlite-kv: rows %lld, database checksum %016llx, reads checksum %016llx\n",
	       (long long)rows, (unsigned long long)table_sum, (unsigned long long)read_sum);
	sqlite3_finalize(all);
	sqlite3_finalize(insert);
	sqlite3_finalize(select);
	sqlite3_finalize(update);
	free(cumulative);
	if (sqlite3_close(db) != SQLITE_OK)
		die(db, "closing the database");
	return 0;
}
