/* Issue 19, signals group and the calls Redis makes beside it: handlers,
 * the mask, the alternate stack and the interval timers are set and read
 * back (natively nothing is ever delivered, and nothing here raises a
 * signal), umask, the thread's name (prctl) and sysinfo. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/time.h>

#include "report.h"

static void on_term(int signal)
{
	(void)signal;
}

int main(void)
{
	struct sigaction action, old;
	memset(&action, 0, sizeof action);
	action.sa_handler = on_term;
	sigemptyset(&action.sa_mask);
	sigaddset(&action.sa_mask, SIGUSR2);
	check("signals", "sigaction sets a SIGTERM handler", sigaction(SIGTERM, &action, &old) == 0);
	check("signals", "the old one was the default", old.sa_handler == SIG_DFL);
	check("signals", "sigaction reads the handler back",
	      sigaction(SIGTERM, NULL, &old) == 0 && old.sa_handler == on_term);
	check("signals", "with its mask", sigismember(&old.sa_mask, SIGUSR2) == 1);
	check("signals", "SIGPIPE ignored", signal(SIGPIPE, SIG_IGN) != SIG_ERR);
	check("signals", "and read back", sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_IGN);
	check_errno("signals", "a SIGKILL handler", sigaction(SIGKILL, &action, NULL), EINVAL);
	check_errno("signals", "a SIGSTOP handler", sigaction(SIGSTOP, &action, NULL), EINVAL);

	sigset_t set, now;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	check("signals", "SIGUSR1 blocked", sigprocmask(SIG_BLOCK, &set, NULL) == 0);
	check("signals", "the mask holds it",
	      sigprocmask(SIG_BLOCK, NULL, &now) == 0 && sigismember(&now, SIGUSR1) == 1);
	check("signals", "SIGUSR1 unblocked", sigprocmask(SIG_UNBLOCK, &set, NULL) == 0);
	check("signals", "the mask does not",
	      sigprocmask(SIG_BLOCK, NULL, &now) == 0 && sigismember(&now, SIGUSR1) == 0);
	sigfillset(&set);
	check("signals", "everything blocked", sigprocmask(SIG_SETMASK, &set, NULL) == 0);
	check("signals", "but SIGKILL and SIGSTOP",
	      sigprocmask(SIG_BLOCK, NULL, &now) == 0 && sigismember(&now, SIGKILL) == 0 &&
		      sigismember(&now, SIGSTOP) == 0 && sigismember(&now, SIGTERM) == 1);
	sigemptyset(&set);
	check("signals", "nothing blocked", sigprocmask(SIG_SETMASK, &set, NULL) == 0);

	stack_t stack, old_stack;
	check("signals", "no alternate stack at first",
	      sigaltstack(NULL, &old_stack) == 0 && (old_stack.ss_flags & SS_DISABLE));
	stack.ss_sp = malloc(1 << 16);
	stack.ss_size = 1 << 16;
	stack.ss_flags = 0;
	check("signals", "an alternate stack set", sigaltstack(&stack, NULL) == 0);
	check("signals", "and read back",
	      sigaltstack(NULL, &old_stack) == 0 && old_stack.ss_sp == stack.ss_sp &&
		      old_stack.ss_size == stack.ss_size && old_stack.ss_flags == 0);
	stack.ss_flags = SS_DISABLE;
	check("signals", "the alternate stack disabled", sigaltstack(&stack, NULL) == 0);
	check("signals", "and so read back",
	      sigaltstack(NULL, &old_stack) == 0 && (old_stack.ss_flags & SS_DISABLE));

	struct itimerval off = {{0, 0}, {0, 0}}, timer;
	check("signals", "the real timer disarmed", setitimer(ITIMER_REAL, &off, &timer) == 0);
	check("signals", "it was not armed", timer.it_value.tv_sec == 0 && timer.it_value.tv_usec == 0);
	check("signals", "getitimer reads it disarmed",
	      getitimer(ITIMER_REAL, &timer) == 0 && timer.it_value.tv_sec == 0 && timer.it_value.tv_usec == 0);

	mode_t first = umask(077);
	check("signals", "umask gives the old mask back", umask(first) == 077);

	char name[16] = {0};
	check("signals", "prctl names the thread", prctl(PR_SET_NAME, "ebb-signals-a-long-name") == 0);
	check("signals", "and reads its first 15 bytes back",
	      prctl(PR_GET_NAME, name) == 0 && strcmp(name, "ebb-signals-a-l") == 0);
	check_errno("signals", "an unknown prctl option", prctl(0x7eb0, 0, 0, 0, 0), EINVAL);

	struct sysinfo info;
	check("signals", "sysinfo", sysinfo(&info) == 0);
	check("signals", "there is memory, some of it free",
	      info.totalram > 0 && info.mem_unit > 0 && info.freeram <= info.totalram);
	check("signals", "there is a process", info.procs >= 1);

	return report_exit();
}
