/* Issue 18: a system call the personality does not provide is ENOSYS,
 * said once on the log however often it is made, and the program goes
 * on. Run with Ebbflow's musl only: Linux itself provides acct. */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void)
{
	check_errno("unknown", "acct", syscall(SYS_acct, 0), ENOSYS);
	check_errno("unknown", "acct again", syscall(SYS_acct, 0), ENOSYS);
	check_errno("unknown", "call 9999", syscall(9999), ENOSYS);
	printf("unknown: the program went on\n");
	return report_exit();
}
