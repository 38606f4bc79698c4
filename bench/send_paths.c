/* CPU time per byte of three ways to send a buffer over loopback TCP between two processes:
 * write() (the kernel copies the bytes into its socket buffers: what ZeroMQ and Open MPI's btl
 * tcp do), vmsplice() + splice() (the sender's pages are handed to TCP without a copy) and
 * send(MSG_ZEROCOPY) (the same, with completions on the socket's error queue). Each sends
 * ROUNDS × 16.8 MB; the receiver read()s every round into one buffer and answers one byte, so
 * the sender only reuses its buffer once the receiver has its copy (what a gossip peer would
 * need before overwriting its model). It prints the rate and the CPU seconds both processes
 * spent (user + system, getrusage) per GB moved:
 *   "send_path <name> GB/s <x> cpu_s_per_GB <y>".
 * Usage: send_paths write|splice|zerocopy [rounds] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

enum { kWrite, kSplice, kZeroCopy };
static const size_t kBytes = 16777216;  /* one 4M-float model */
static const size_t kPiece = 1u << 20;  /* per vmsplice / MSG_ZEROCOPY send: the pipe's size */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double seconds(struct timeval t) { return t.tv_sec + t.tv_usec * 1e-6; }

/* Drains MSG_ZEROCOPY completions (none waiting is fine). */
static void reap(int s) {
  for (;;) {
    char control[256];
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    if (recvmsg(s, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
  }
}

/* Sends one round of buf with the given path; 0 on success. */
static int send_round(int mode, int s, const int pipe_fds[2], char* buf) {
  for (size_t off = 0; off < kBytes;) {
    const size_t n = kBytes - off < kPiece ? kBytes - off : kPiece;
    if (mode == kWrite) {
      const ssize_t w = write(s, buf + off, kBytes - off);
      if (w <= 0) return -1;
      off += (size_t)w;
    } else if (mode == kSplice) {
      struct iovec v = {buf + off, n};
      const ssize_t mapped = vmsplice(pipe_fds[1], &v, 1, 0);
      if (mapped <= 0) return -1;
      for (ssize_t moved = 0; moved < mapped;) {
        const ssize_t k = splice(pipe_fds[0], NULL, s, NULL, (size_t)(mapped - moved), SPLICE_F_MOVE | SPLICE_F_MORE);
        if (k <= 0) return -1;
        moved += k;
      }
      off += (size_t)mapped;
    } else {
      const ssize_t w = send(s, buf + off, n, MSG_ZEROCOPY);
      if (w < 0 && errno == ENOBUFS) {  /* too many completions outstanding */
        reap(s);
        continue;
      }
      if (w <= 0) return -1;
      off += (size_t)w;
    }
  }
  return 0;
}

static int fail(const char* what) {
  perror(what);
  return 1;
}

static int sender(int mode, const struct sockaddr_in* addr, int rounds) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (const struct sockaddr*)addr, sizeof(*addr))) return fail("send_paths: connect");
  const int one = 1;
  if (mode == kZeroCopy && setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)))
    return fail("send_paths: SO_ZEROCOPY");
  int pipe_fds[2];
  if (pipe(pipe_fds) || fcntl(pipe_fds[1], F_SETPIPE_SZ, (int)kPiece) < 0) return fail("send_paths: pipe");
  char* buf = aligned_alloc(4096, kBytes);
  if (!buf) return 1;
  memset(buf, 7, kBytes);
  for (int r = 0; r < rounds; ++r) {
    char ack;
    if (send_round(mode, s, pipe_fds, buf)) return fail("send_paths: send");
    if (read(s, &ack, 1) != 1) return fail("send_paths: the receiver's answer");
    if (mode == kZeroCopy) reap(s);
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* names[] = {"write", "splice", "zerocopy"};
  int mode = -1;
  for (int i = 0; argc >= 2 && i < 3; ++i)
    if (!strcmp(argv[1], names[i])) mode = i;
  const int rounds = argc == 3 ? atoi(argv[2]) : 40;
  if (mode < 0 || argc > 3 || rounds <= 0) {
    fprintf(stderr, "usage: send_paths write|splice|zerocopy [rounds > 0]\n");
    return 2;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, (struct sockaddr*)&addr, sizeof(addr)) || listen(listener, 1) ||
      getsockname(listener, (struct sockaddr*)&addr, &len)) {
    perror("send_paths: listen");
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) _exit(sender(mode, &addr, rounds));
  int s = accept(listener, NULL, NULL);
  char* buf = aligned_alloc(4096, kBytes);
  if (s < 0 || !buf) return 1;
  memset(buf, 0, kBytes);
  const double start = now();
  long long got = 0;
  for (int r = 0; r < rounds; ++r) {
    size_t off = 0;
    for (ssize_t n; off < kBytes && (n = read(s, buf + off, kBytes - off)) > 0;) off += (size_t)n;
    got += (long long)off;
    if (off < kBytes || send(s, "a", 1, MSG_NOSIGNAL) != 1) break;  /* the sender failed */
  }
  const double secs = now() - start;
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != (long long)kBytes * rounds || buf[kBytes - 1] != 7 || !WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "send_paths %s: received %lld of %lld bytes (sender status %d)\n", names[mode], got,
            (long long)kBytes * rounds, status);
    return 1;
  }
  struct rusage self, child;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &child);
  const double cpu = seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(child.ru_utime) + seconds(child.ru_stime);
  const double gb = (double)got / 1e9;
  printf("send_path %s GB/s %.2f cpu_s_per_GB %.3f\n", names[mode], gb / secs, cpu / gb);
  return 0;
}
