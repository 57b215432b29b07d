/* Issue 18, files group, in the directory named by argv[1] (empty, made
 * by whoever runs this): open/openat, read/write, pread/pwrite,
 * readv/writev, lseek, fstat/stat/lstat, fsync/fdatasync, ftruncate,
 * unlink, rename, mkdir, rmdir, getdents64 (readdir), fcntl, access,
 * dup/dup2/dup3, getcwd/chdir; and the errors each gives. Everything it
 * makes it removes again. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "report.h"

/* The names in `path`, but . and .., sorted, joined by spaces. */
static void list(const char *path, char *out, size_t size)
{
	char names[16][256];
	int count = 0;
	DIR *dir = opendir(path);
	struct dirent *entry;
	out[0] = 0;
	if (!dir) {
		snprintf(out, size, "(opendir failed: %s)", errno_name(errno));
		return;
	}
	while ((entry = readdir(dir)) && count < 16)
		if (strcmp(entry->d_name, ".") && strcmp(entry->d_name, ".."))
			snprintf(names[count++], sizeof names[0], "%s", entry->d_name);
	closedir(dir);
	qsort(names, count, sizeof names[0], (int (*)(const void *, const void *))strcmp);
	for (int i = 0; i < count; i++) {
		strncat(out, names[i], size - strlen(out) - 1);
		if (i + 1 < count)
			strncat(out, " ", size - strlen(out) - 1);
	}
}

static int ends_with(const char *text, const char *end)
{
	size_t a = strlen(text), b = strlen(end);
	return a >= b && strcmp(text + a - b, end) == 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: files DIRECTORY (an empty directory to work in)\n");
		return 2;
	}
	const char *last = strrchr(argv[1], '/');
	last = last ? last + 1 : argv[1];
	char cwd[4096], text[256];
	check("files", "chdir into the directory", chdir(argv[1]) == 0);
	check("files", "getcwd names it", getcwd(cwd, sizeof cwd) && ends_with(cwd, last));

	check("files", "mkdir d", mkdir("d", 0755) == 0);
	check_errno("files", "mkdir d again", mkdir("d", 0755), EEXIST);
	check("files", "chdir d", chdir("d") == 0);
	check("files", "getcwd ends in /d", getcwd(cwd, sizeof cwd) && ends_with(cwd, "/d"));
	check("files", "chdir ..", chdir("..") == 0);

	int fd = open("d/f", O_CREAT | O_RDWR | O_TRUNC, 0644);
	check("files", "open d/f O_CREAT", fd >= 0);
	check("files", "write 11 bytes", write(fd, "hello world", 11) == 11);
	check("files", "pwrite at offset 6", pwrite(fd, "WORLD", 5, 6) == 5);
	check("files", "lseek SEEK_CUR after pwrite is still 11", lseek(fd, 0, SEEK_CUR) == 11);
	memset(text, 0, sizeof text);
	check("files", "pread 11 bytes at 0", pread(fd, text, 11, 0) == 11);
	check("files", "they are the written ones", strcmp(text, "hello WORLD") == 0);
	check("files", "lseek SEEK_END is 11", lseek(fd, 0, SEEK_END) == 11);
	struct iovec out[3] = {{"ab", 2}, {"cde", 3}, {"f", 1}};
	check("files", "writev 3 buffers", writev(fd, out, 3) == 6);
	check("files", "lseek SEEK_SET 11", lseek(fd, 11, SEEK_SET) == 11);
	char a[2], b[3], c[1];
	struct iovec in[3] = {{a, 2}, {b, 3}, {c, 1}};
	check("files", "readv 3 buffers", readv(fd, in, 3) == 6);
	check("files", "readv filled each in order",
	      !memcmp(a, "ab", 2) && !memcmp(b, "cde", 3) && c[0] == 'f');
	check("files", "read at the end is 0", read(fd, text, 10) == 0);
	check_errno("files", "lseek to -1", lseek(fd, -1, SEEK_SET), EINVAL);

	struct stat st;
	check("files", "fstat", fstat(fd, &st) == 0);
	check("files", "it is a regular file of 17 bytes", S_ISREG(st.st_mode) && st.st_size == 17);
	check("files", "ftruncate to 5", ftruncate(fd, 5) == 0);
	check("files", "fstat says 5", fstat(fd, &st) == 0 && st.st_size == 5);
	check("files", "ftruncate to 10000", ftruncate(fd, 10000) == 0);
	static char zeros[9995], back[9995];
	check("files", "pread the extension", pread(fd, back, sizeof back, 5) == sizeof back);
	check("files", "the extension reads as zeros", memcmp(back, zeros, sizeof back) == 0);
	check("files", "fsync", fsync(fd) == 0);
	check("files", "fdatasync", fdatasync(fd) == 0);

	int flags = fcntl(fd, F_GETFL);
	check("files", "fcntl F_GETFL says read-write", flags >= 0 && (flags & O_ACCMODE) == O_RDWR);
	check("files", "fcntl F_SETFL O_APPEND", fcntl(fd, F_SETFL, flags | O_APPEND) == 0);
	lseek(fd, 0, SEEK_SET);
	check("files", "write with O_APPEND", write(fd, "Z", 1) == 1);
	check("files", "it went to the end", lseek(fd, 0, SEEK_CUR) == 10001);
	check("files", "fcntl F_SETFD FD_CLOEXEC", fcntl(fd, F_SETFD, FD_CLOEXEC) == 0);
	check("files", "fcntl F_GETFD says so", fcntl(fd, F_GETFD) == FD_CLOEXEC);

	int copy = dup(fd);
	check("files", "dup", copy >= 0 && copy != fd);
	check("files", "lseek through the copy", lseek(copy, 3, SEEK_SET) == 3);
	check("files", "the original shares the offset", lseek(fd, 0, SEEK_CUR) == 3);
	check("files", "the copy is not close-on-exec", fcntl(copy, F_GETFD) == 0);
	check("files", "dup2 to 100", dup2(fd, 100) == 100);
	check("files", "dup3 to 101 with O_CLOEXEC", dup3(fd, 101, O_CLOEXEC) == 101);
	check("files", "101 is close-on-exec", fcntl(101, F_GETFD) == FD_CLOEXEC);
	check_errno("files", "dup3 onto itself", dup3(fd, fd, 0), EINVAL);
	check("files", "close the copies", close(copy) == 0 && close(100) == 0 && close(101) == 0);
	check("files", "close", close(fd) == 0);
	check_errno("files", "close again", close(fd), EBADF);
	check_errno("files", "read a closed descriptor", read(fd, text, 1), EBADF);

	fd = openat(AT_FDCWD, "d/g", O_CREAT | O_EXCL | O_WRONLY, 0600);
	check("files", "openat d/g O_CREAT|O_EXCL", fd >= 0);
	check_errno("files", "read a write-only descriptor", read(fd, text, 1), EBADF);
	close(fd);
	check_errno("files", "O_EXCL on an existing file", open("d/g", O_CREAT | O_EXCL | O_WRONLY, 0600), EEXIST);
	check_errno("files", "open a missing file", open("d/missing", O_RDONLY), ENOENT);
	check_errno("files", "open below a file", open("d/f/x", O_RDONLY), ENOTDIR);
	check_errno("files", "open a directory for writing", open("d", O_WRONLY), EISDIR);

	check("files", "access d/f", access("d/f", F_OK) == 0);
	check_errno("files", "access a missing file", access("d/missing", F_OK), ENOENT);
	check("files", "stat d is a directory", stat("d", &st) == 0 && S_ISDIR(st.st_mode));
	check("files", "lstat d/f is a regular file", lstat("d/f", &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 10001);
	check_errno("files", "stat a missing file", stat("d/missing", &st), ENOENT);

	list("d", text, sizeof text);
	printf("files: d holds: %s\n", text);
	check("files", "rename d/g to d/h", rename("d/g", "d/h") == 0);
	check_errno("files", "d/g is gone", access("d/g", F_OK), ENOENT);
	check("files", "rename d/h over d/f", rename("d/h", "d/f") == 0);
	check("files", "d/f is now the empty one", stat("d/f", &st) == 0 && st.st_size == 0);
	check("files", "mkdir d/e", mkdir("d/e", 0755) == 0);
	list("d", text, sizeof text);
	printf("files: d holds: %s\n", text);

	check_errno("files", "rmdir a non-empty directory", rmdir("d"), ENOTEMPTY);
	check_errno("files", "unlink a directory", unlink("d/e"), EISDIR);
	check_errno("files", "unlink a missing file", unlink("d/missing"), ENOENT);
	check("files", "unlink d/f", unlink("d/f") == 0);
	check("files", "rmdir d/e", rmdir("d/e") == 0);
	check("files", "rmdir d", rmdir("d") == 0);
	list(".", text, sizeof text);
	printf("files: the directory holds: %s\n", text[0] ? text : "nothing");
	return report_exit();
}
