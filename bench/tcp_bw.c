/* Loopback TCP bandwidth between two processes on this machine: what any TCP data path between
 * peers here (ZeroMQ's, Open MPI's btl tcp) is bounded by. A child sends BYTES (default 1 GiB) in
 * 1 MiB writes over 127.0.0.1 to the parent, which times the receive.
 * Prints "tcp_loopback bytes <b> GB/s <x>". Usage: tcp_bw [bytes] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int fail(const char* what) {
  perror(what);
  return 1;
}

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "--help") || atoll(argv[1]) <= 0))) {
    fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr, "usage: tcp_bw [bytes > 0]\n");
    return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
  }
  const long long total = argc == 2 ? atoll(argv[1]) : 1LL << 30;
  const size_t chunk = 1u << 20;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return fail("socket");
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, (struct sockaddr*)&addr, sizeof(addr)) || listen(listener, 1) ||
      getsockname(listener, (struct sockaddr*)&addr, &len))
    return fail("bind");
  char* buf = malloc(chunk);
  if (!buf) return 1;
  memset(buf, 7, chunk);
  const pid_t pid = fork();
  if (pid < 0) return fail("fork");
  if (pid == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr*)&addr, sizeof(addr))) _exit(fail("connect"));
    for (long long sent = 0; sent < total;) {
      const size_t n = total - sent < (long long)chunk ? (size_t)(total - sent) : chunk;
      const ssize_t w = write(s, buf, n);
      if (w <= 0) _exit(fail("write"));
      sent += w;
    }
    close(s);
    _exit(0);
  }
  int s = accept(listener, NULL, NULL);
  if (s < 0) return fail("accept");
  const double start = now();
  long long got = 0;
  for (ssize_t r; (r = read(s, buf, chunk)) > 0;) got += r;
  const double secs = now() - start;
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != total || !WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "tcp_bw: received %lld of %lld bytes\n", got, total);
    return 1;
  }
  printf("tcp_loopback bytes %lld GB/s %.2f\n", total, total / secs / 1e9);
  return 0;
}
