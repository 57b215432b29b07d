/* Issue 18, files populated at boot: lists the tree under DIR (default
 * ".") in name order, a line per entry, "packed: PATH dir" or "packed:
 * PATH SIZE bytes HASH" (FNV-1a of the contents), PATH relative to DIR.
 * Natively DIR's files come from `./ebb run ... --native --files DIR`
 * (and the program is given "/"); hosted, from the directory itself. The
 * two runs must print the same lines. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint64_t hash_file(const char *path, long long *size)
{
	uint64_t hash = 0xcbf29ce484222325ULL;
	int fd = open(path, O_RDONLY);
	*size = -1;
	if (fd < 0)
		return 0;
	unsigned char buffer[4096];
	ssize_t got;
	*size = 0;
	while ((got = read(fd, buffer, sizeof buffer)) > 0) {
		for (ssize_t i = 0; i < got; i++)
			hash = (hash ^ buffer[i]) * 0x100000001b3ULL;
		*size += got;
	}
	close(fd);
	return hash;
}

/* Lists `dir` (its path from the root given: `shown`). */
static void list(const char *dir, const char *shown)
{
	DIR *stream = opendir(dir);
	if (!stream) {
		check("packed", "opendir", 0);
		return;
	}
	char *names[512];
	int count = 0;
	struct dirent *entry;
	while ((entry = readdir(stream)) && count < 512) {
		if (strcmp(entry->d_name, ".") && strcmp(entry->d_name, ".."))
			names[count++] = strdup(entry->d_name);
	}
	closedir(stream);
	qsort(names, count, sizeof names[0], by_name);
	for (int i = 0; i < count; i++) {
		char path[4096], inner[4096];
		size_t len = strlen(dir);
		snprintf(path, sizeof path, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", names[i]);
		snprintf(inner, sizeof inner, "%s%s%s", shown, *shown ? "/" : "", names[i]);
		struct stat st;
		if (stat(path, &st) != 0) {
			check("packed", "stat", 0);
		} else if (S_ISDIR(st.st_mode)) {
			printf("packed: %s dir\n", inner);
			list(path, inner);
		} else {
			long long size;
			uint64_t hash = hash_file(path, &size);
			printf("packed: %s %lld bytes %016llx mode %o\n", inner, size,
			       (unsigned long long)hash, (unsigned)(st.st_mode & 0777));
		}
		free(names[i]);
	}
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : ".";
	list(root, "");
	return report_exit();
}
