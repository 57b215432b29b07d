/* Issue 18, memory group: brk, malloc on top of it and of mmap,
 * anonymous mmap/munmap/mprotect/madvise, mremap. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

static int filled_with(const unsigned char *p, size_t n, unsigned char byte)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != byte)
			return 0;
	return 1;
}

int main(void)
{
	/* brk first, before stdio or malloc may move the break (glibc's
	 * malloc uses it): grow by 64 KiB, use it, give it back. */
	uintptr_t start = (uintptr_t)syscall(SYS_brk, 0);
	uintptr_t grown = (uintptr_t)syscall(SYS_brk, start + 65536);
	int brk_grew = start != 0 && grown == start + 65536;
	if (brk_grew)
		memset((void *)start, 0xab, 65536);
	int brk_kept = brk_grew && filled_with((void *)start, 65536, 0xab);
	uintptr_t back = (uintptr_t)syscall(SYS_brk, start);
	check("memory", "brk grows by 64 KiB", brk_grew);
	check("memory", "brk memory holds what was written", brk_kept);
	check("memory", "brk shrinks back", back == start);

	/* malloc: 1000 blocks of many sizes, each filled and checked. */
	enum { BLOCKS = 1000 };
	static unsigned char *blocks[BLOCKS];
	int allocated = 1;
	for (int i = 0; i < BLOCKS; i++) {
		size_t size = 1 + (size_t)(i * 37) % 4000;
		blocks[i] = malloc(size);
		if (!blocks[i]) {
			allocated = 0;
			break;
		}
		memset(blocks[i], i & 0xff, size);
	}
	int intact = allocated;
	for (int i = 0; intact && i < BLOCKS; i++)
		intact = filled_with(blocks[i], 1 + (size_t)(i * 37) % 4000, i & 0xff);
	for (int i = 0; i < BLOCKS; i++)
		free(blocks[i]);
	check("memory", "malloc of 1000 blocks", allocated);
	check("memory", "every block holds what was written", intact);

	/* A large block (mapped by both C libraries) grown by realloc. */
	size_t big = 8u << 20;
	unsigned char *large = malloc(big);
	int large_ok = large != NULL;
	if (large_ok) {
		memset(large, 0x5a, big);
		unsigned char *larger = realloc(large, 2 * big);
		large_ok = larger != NULL && filled_with(larger, big, 0x5a);
		free(larger ? larger : large);
	}
	check("memory", "8 MiB malloc, realloc to 16 MiB keeps the data", large_ok);

	/* Anonymous mappings. */
	size_t length = 1u << 20;
	unsigned char *map = mmap(NULL, length, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check("memory", "mmap of 1 MiB", map != MAP_FAILED);
	if (map == MAP_FAILED)
		return report_exit();
	check("memory", "a new mapping reads as zeros", filled_with(map, length, 0));
	memset(map, 0x77, length);
	check("memory", "madvise DONTNEED", madvise(map, length, MADV_DONTNEED) == 0);
	check("memory", "after DONTNEED it reads as zeros again", filled_with(map, length, 0));
	map[0] = 1;
	check("memory", "mprotect to read-only", mprotect(map, length, PROT_READ) == 0);
	check("memory", "read-only memory still reads", map[0] == 1);
	check("memory", "mprotect back to read-write", mprotect(map, length, PROT_READ | PROT_WRITE) == 0);
	memset(map, 0x33, length);
	unsigned char *moved = mremap(map, length, 4 * length, MREMAP_MAYMOVE);
	check("memory", "mremap to 4 MiB", moved != MAP_FAILED);
	if (moved != MAP_FAILED) {
		check("memory", "mremap keeps the data", filled_with(moved, length, 0x33));
		check("memory", "the grown part reads as zeros", filled_with(moved + length, 3 * length, 0));
		map = moved;
		length *= 4;
	}
	check("memory", "munmap", munmap(map, length) == 0);
	check_errno("memory", "mmap of length 0", (long)(intptr_t)mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), EINVAL);
	return report_exit();
}
