/* Issue 18, process group: ids, uname, getrandom, limits, usage, and the
 * exit code (7) reaching whoever started the program. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "report.h"

int main(void)
{
	pid_t pid = getpid();
	check("process", "getpid is positive", pid > 0);
	check("process", "the main thread's id is the process id", syscall(SYS_gettid) == pid);
	check("process", "getppid answers", getppid() >= 0);
	check("process", "the user and group ids answer",
	      (long)getuid() >= 0 && (long)geteuid() >= 0 && (long)getgid() >= 0 && (long)getegid() >= 0);

	struct utsname name;
	check("process", "uname", uname(&name) == 0);
	check("process", "uname names a system", name.sysname[0] != 0);
	check("process", "uname's machine is x86_64", strcmp(name.machine, "x86_64") == 0);

	unsigned char first[32], second[32];
	check("process", "getrandom 32 bytes", getrandom(first, sizeof first, 0) == sizeof first);
	check("process", "getrandom again", getrandom(second, sizeof second, 0) == sizeof second);
	check("process", "two draws differ", memcmp(first, second, sizeof first) != 0);

	struct rlimit limit;
	check("process", "getrlimit RLIMIT_STACK", getrlimit(RLIMIT_STACK, &limit) == 0);
	check("process", "the stack limit is positive", limit.rlim_cur > 0);
	check("process", "prlimit RLIMIT_NOFILE", prlimit(0, RLIMIT_NOFILE, NULL, &limit) == 0);
	check("process", "the open-file limit is positive", limit.rlim_cur > 0);
	struct rlimit lowered = {64, 128};
	check("process", "setrlimit lowers RLIMIT_NOFILE", setrlimit(RLIMIT_NOFILE, &lowered) == 0);
	check("process", "getrlimit reads the lowered limit",
	      getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur == 64 && limit.rlim_max == 128);
	struct rlimit inverted = {100, 50};
	check_errno("process", "a soft limit above the hard one", setrlimit(RLIMIT_NOFILE, &inverted), EINVAL);

	struct rusage usage;
	check("process", "getrusage RUSAGE_SELF", getrusage(RUSAGE_SELF, &usage) == 0);

	if (report_exit() != 0)
		return 1;
	printf("process: exiting with 7\n");
	exit(7);
}
