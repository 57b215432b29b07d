/* Shared by the syscall-group programs: every check prints one line,
 * "GROUP: WHAT: ok" or "GROUP: WHAT: FAILED (DETAIL)", with errno by name
 * so that the text is the same under glibc and musl, natively and hosted.
 * A program exits 0 when every check passed, 1 otherwise. */
#ifndef EBB_REPORT_H
#define EBB_REPORT_H

#include <errno.h>
#include <stdio.h>

static int report_failures;

static inline const char *errno_name(int e)
{
	switch (e) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EINTR: return "EINTR";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EEXIST: return "EEXIST";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENOTTY: return "ENOTTY";
	case ESPIPE: return "ESPIPE";
	case ENOSYS: return "ENOSYS";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EPIPE: return "EPIPE";
	case ENOTSOCK: return "ENOTSOCK";
	case ENOPROTOOPT: return "ENOPROTOOPT";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case ENOTCONN: return "ENOTCONN";
	case EINPROGRESS: return "EINPROGRESS";
	default: return "another errno";
	}
}

/* One check: its line, counted when it failed. */
static inline void check(const char *group, const char *what, int passed)
{
	printf("%s: %s: %s\n", group, what, passed ? "ok" : "FAILED");
	if (!passed)
		report_failures++;
}

/* A call expected to fail with errno `expected`. */
static inline void check_errno(const char *group, const char *what, long result, int expected)
{
	int passed = result == -1 && errno == expected;
	printf("%s: %s: %s", group, what, errno_name(result == -1 ? errno : 0));
	printf("%s\n", passed ? "" : " (FAILED)");
	if (!passed)
		report_failures++;
}

static inline int report_exit(void)
{
	fflush(stdout);
	return report_failures ? 1 : 0;
}

#endif
