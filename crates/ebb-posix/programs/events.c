/* Issue 19, the events and sockets groups without a peer: pipes (data,
 * end of file, EPIPE, non-blocking), eventfd (counter and semaphore),
 * epoll (level- and edge-triggered, one-shot, timeouts, errors), poll,
 * a read that blocks until another thread writes, and a TCP socket that
 * binds, listens and answers the calls a server makes before its first
 * client. Served by Ebbflow's objects natively, by Linux hosted. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static int late_pipe[2];

static void *write_later(void *unused)
{
	(void)unused;
	struct timespec pause = {0, 20 * 1000 * 1000};
	nanosleep(&pause, NULL);
	ssize_t wrote = write(late_pipe[1], "late", 4);
	return (void *)wrote;
}

static void pipes(void)
{
	int fds[2];
	char buf[16];
	check("events", "pipe2", pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
	check("events", "the ends are the lowest free descriptors", fds[0] == 3 && fds[1] == 4);
	struct stat st;
	check("events", "fstat says a FIFO", fstat(fds[0], &st) == 0 && S_ISFIFO(st.st_mode));
	check_errno("events", "an empty non-blocking pipe", read(fds[0], buf, sizeof buf), EAGAIN);
	check("events", "write", write(fds[1], "hello", 5) == 5);
	check("events", "read what was written", read(fds[0], buf, sizeof buf) == 5 && memcmp(buf, "hello", 5) == 0);
	check_errno("events", "reading the write end", read(fds[1], buf, 1), EBADF);
	check("events", "F_GETFL has O_NONBLOCK", (fcntl(fds[0], F_GETFL) & O_NONBLOCK) != 0);
	check("events", "F_SETFL clears it", fcntl(fds[0], F_SETFL, 0) == 0 && (fcntl(fds[0], F_GETFL) & O_NONBLOCK) == 0);
	check("events", "write then close the write end", write(fds[1], "x", 1) == 1 && close(fds[1]) == 0);
	check("events", "the last byte, then end of file",
	      read(fds[0], buf, sizeof buf) == 1 && read(fds[0], buf, sizeof buf) == 0);
	close(fds[0]);

	check("events", "pipe", pipe(fds) == 0);
	close(fds[0]);
	check_errno("events", "writing with no reader", write(fds[1], "x", 1), EPIPE);
	close(fds[1]);

	/* A blocking read waits for another thread's write. */
	check("events", "a pipe for a thread", pipe(late_pipe) == 0);
	pthread_t writer;
	check("events", "the writer starts", pthread_create(&writer, NULL, write_later, NULL) == 0);
	check("events", "a blocking read waits for it",
	      read(late_pipe[0], buf, sizeof buf) == 4 && memcmp(buf, "late", 4) == 0);
	void *wrote;
	check("events", "the writer ends", pthread_join(writer, &wrote) == 0 && (ssize_t)wrote == 4);
	close(late_pipe[0]);
	close(late_pipe[1]);

	/* Polls that never wait still let the writer run (natively the loop
	 * runs only while a thread is parked: a zero timeout yields once). */
	check("events", "a pipe for a spinning reader", pipe(late_pipe) == 0);
	check("events", "the writer starts again", pthread_create(&writer, NULL, write_later, NULL) == 0);
	struct pollfd spun = {late_pipe[0], POLLIN, 0};
	long spins = 0;
	while (poll(&spun, 1, 0) == 0 && spins < 100000000L)
		spins++;
	check("events", "zero-timeout polls see the write", spun.revents == POLLIN);
	check("events", "the writer ends again", pthread_join(writer, &wrote) == 0 && (ssize_t)wrote == 4);
	close(late_pipe[0]);
	close(late_pipe[1]);

	/* A blocking readv waits only for its first buffer: with 6 bytes
	 * there and room for 8 it returns 6 rather than wait for 2 more. */
	check("events", "a blocking pipe for readv", pipe(fds) == 0 && write(fds[1], "abcdef", 6) == 6);
	char first[4], second[4];
	struct iovec parts[2] = {{first, sizeof first}, {second, sizeof second}};
	check("events", "readv takes what is there",
	      readv(fds[0], parts, 2) == 6 && memcmp(first, "abcd", 4) == 0 && memcmp(second, "ef", 2) == 0);
	close(fds[0]);
	close(fds[1]);
}

static void eventfds(void)
{
	uint64_t value;
	int fd = eventfd(0, EFD_NONBLOCK);
	check("events", "eventfd", fd >= 0);
	check_errno("events", "reading zero", read(fd, &value, 8), EAGAIN);
	value = 3;
	check("events", "adding 3", write(fd, &value, 8) == 8);
	value = 4;
	check("events", "adding 4", write(fd, &value, 8) == 8);
	check("events", "reading takes 7", read(fd, &value, 8) == 8 && value == 7);
	check_errno("events", "a short read", read(fd, &value, 4), EINVAL);
	close(fd);
	fd = eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
	check("events", "a semaphore gives 1", read(fd, &value, 8) == 8 && value == 1);
	check("events", "and 1 again", read(fd, &value, 8) == 8 && value == 1);
	check_errno("events", "then nothing", read(fd, &value, 8), EAGAIN);
	close(fd);
}

static void epolls(void)
{
	struct epoll_event event, got[4];
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	check("events", "epoll_create1", epfd >= 0);
	check_errno("events", "epoll_create1 with a bad flag", epoll_create1(1), EINVAL);
	int counter = eventfd(0, EFD_NONBLOCK);
	int fds[2];
	check("events", "a pipe to watch", pipe2(fds, O_NONBLOCK) == 0);
	event.events = EPOLLIN;
	event.data.u64 = 111;
	check("events", "add the counter", epoll_ctl(epfd, EPOLL_CTL_ADD, counter, &event) == 0);
	check_errno("events", "add it twice", epoll_ctl(epfd, EPOLL_CTL_ADD, counter, &event), EEXIST);
	check_errno("events", "modify what is not there", epoll_ctl(epfd, EPOLL_CTL_MOD, fds[0], &event), ENOENT);
	check_errno("events", "watch itself", epoll_ctl(epfd, EPOLL_CTL_ADD, epfd, &event), EINVAL);
	check_errno("events", "watch a closed descriptor", epoll_ctl(epfd, EPOLL_CTL_ADD, 99, &event), EBADF);
	check_errno("events", "wait for no events", epoll_wait(epfd, got, 0, 0), EINVAL);
	event.events = EPOLLIN | EPOLLET;
	event.data.u64 = 222;
	check("events", "add the pipe, edge-triggered", epoll_ctl(epfd, EPOLL_CTL_ADD, fds[0], &event) == 0);
	check("events", "nothing ready yet", epoll_wait(epfd, got, 4, 0) == 0);
	check("events", "a 20 ms timeout passes", epoll_wait(epfd, got, 4, 20) == 0);

	uint64_t one = 1;
	check("events", "the counter gets 1", write(counter, &one, 8) == 8);
	check("events", "it is readable",
	      epoll_wait(epfd, got, 4, -1) == 1 && got[0].events == EPOLLIN && got[0].data.u64 == 111);
	check("events", "and stays so (level-triggered)",
	      epoll_wait(epfd, got, 4, 0) == 1 && got[0].data.u64 == 111);
	uint64_t taken;
	check("events", "taken", read(counter, &taken, 8) == 8);
	check("events", "not any more", epoll_wait(epfd, got, 4, 0) == 0);

	check("events", "the pipe gets data", write(fds[1], "ab", 2) == 2);
	check("events", "the edge is reported", epoll_wait(epfd, got, 4, 0) == 1 && got[0].data.u64 == 222);
	check("events", "once", epoll_wait(epfd, got, 4, 0) == 0);
	event.events = EPOLLIN | EPOLLONESHOT;
	event.data.u64 = 333;
	check("events", "made one-shot", epoll_ctl(epfd, EPOLL_CTL_MOD, fds[0], &event) == 0);
	check("events", "reported", epoll_wait(epfd, got, 4, 0) == 1 && got[0].data.u64 == 333);
	check("events", "then disarmed", epoll_wait(epfd, got, 4, 0) == 0);
	check("events", "the writer closes", close(fds[1]) == 0);
	event.events = EPOLLIN;
	check("events", "rearmed", epoll_ctl(epfd, EPOLL_CTL_MOD, fds[0], &event) == 0);
	check("events", "data and the hang-up",
	      epoll_wait(epfd, got, 4, 0) == 1 && got[0].events == (EPOLLIN | EPOLLHUP));
	check("events", "remove the pipe", epoll_ctl(epfd, EPOLL_CTL_DEL, fds[0], NULL) == 0);

	/* Entries are keyed by (file, descriptor): a watched descriptor
	 * closed while a duplicate keeps its file open, then reused for
	 * another file, can be added again. */
	int watched = eventfd(1, EFD_NONBLOCK);
	int keeper = dup(watched);
	event.events = EPOLLIN;
	event.data.u64 = 444;
	check("events", "watch an eventfd", epoll_ctl(epfd, EPOLL_CTL_ADD, watched, &event) == 0);
	check("events", "close it, its duplicate stays", close(watched) == 0);
	int reused = eventfd(1, EFD_NONBLOCK);
	event.data.u64 = 555;
	check("events", "the reused descriptor is added anew",
	      reused == watched && epoll_ctl(epfd, EPOLL_CTL_ADD, reused, &event) == 0);
	check("events", "both entries report", epoll_wait(epfd, got, 4, 0) == 2);
	check("events", "deleting the descriptor deletes the new file's entry",
	      epoll_ctl(epfd, EPOLL_CTL_DEL, reused, NULL) == 0 && epoll_wait(epfd, got, 4, 0) == 1 &&
		      got[0].data.u64 == 444);
	close(reused);
	close(keeper);
	check_errno("events", "remove it again", epoll_ctl(epfd, EPOLL_CTL_DEL, fds[0], NULL), ENOENT);
	close(fds[0]);
	close(counter);
	close(epfd);
}

static void polls(void)
{
	int fds[2];
	check("events", "a pipe to poll", pipe(fds) == 0);
	struct pollfd watched[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLOUT, 0}};
	check("events", "poll: only the write end is ready",
	      poll(watched, 2, 0) == 1 && watched[0].revents == 0 && watched[1].revents == POLLOUT);
	check("events", "poll waits out its timeout", poll(watched, 1, 20) == 0);
	write(fds[1], "x", 1);
	check("events", "poll: now the read end too", poll(watched, 2, -1) == 2 && watched[0].revents == POLLIN);
	struct pollfd closed = {99, POLLIN, 0};
	check("events", "poll: a closed descriptor is POLLNVAL", poll(&closed, 1, 0) == 1 && closed.revents == POLLNVAL);
	check_errno("events", "poll: an array that wraps the address space",
		    poll((struct pollfd *)(~(uintptr_t)0 - 7), 2, 0), EFAULT);
	close(fds[0]);
	close(fds[1]);
}

static void sockets(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	check("events", "a TCP socket", fd >= 0);
	struct stat st;
	check("events", "fstat says a socket", fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode));
	int on = 1, value = 0;
	socklen_t len = sizeof value;
	check("events", "SO_REUSEADDR", setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0);
	check("events", "reads back",
	      getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &value, &len) == 0 && value != 0 && len == sizeof value);
	check("events", "SO_TYPE is a stream",
	      getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) == 0 && value == SOCK_STREAM);
	check("events", "TCP_NODELAY", setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0);
	check_errno("events", "a short option", setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, 2), EINVAL);
	check_errno("events", "no peer yet", getpeername(fd, NULL, &len), ENOTCONN);
	char byte;
	check_errno("events", "recv before connecting", recv(fd, &byte, 1, 0), ENOTCONN);
	struct sockaddr_in addr;
	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_ANY);
	addr.sin_port = 0;
	check("events", "bind to any address", bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
	check_errno("events", "a short address", bind(fd, (struct sockaddr *)&addr, 8), EINVAL);
	check("events", "listen", listen(fd, 16) == 0);
	len = sizeof addr;
	check("events", "getsockname has the chosen port",
	      getsockname(fd, (struct sockaddr *)&addr, &len) == 0 && len == sizeof addr &&
		      addr.sin_family == AF_INET && addr.sin_port != 0);
	check("events", "SO_ACCEPTCONN",
	      getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &(socklen_t){sizeof value}) == 0 && value == 1);
	check_errno("events", "nobody to accept", accept4(fd, NULL, NULL, SOCK_NONBLOCK), EAGAIN);
	int epfd = epoll_create1(0);
	struct epoll_event event = {.events = EPOLLIN, .data.u64 = 7}, got;
	check("events", "watch the listener", epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0);
	check("events", "no connection in 20 ms", epoll_wait(epfd, &got, 1, 20) == 0);
	close(epfd);
	check_errno("events", "a socket call on a pipe", listen(STDIN_FILENO, 1), ENOTSOCK);
	check("events", "close", close(fd) == 0);
	check_errno("events", "UDP here", socket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	pipes();
	eventfds();
	epolls();
	polls();
	sockets();
	return report_failures == 0 ? 0 : 1;
}
