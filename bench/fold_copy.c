/* The reader's side of a same-host one-peer gossip round, three ways, to size the next step of
 * the single-copy path (#22): fold out = ½·self + ½·theirs over 16.8 MB where `theirs` lives in
 * another process (a forked child that wrote it), reached
 *   - as single copy does today: process_vm_readv of each 1 MiB chunk of the child's private
 *     memory into a buffer, then the fold;
 *   - per block: process_vm_readv of BLOCK bytes into a small buffer, folded while it is in cache;
 *   - with no copy: folded straight out of a shared mapping the child wrote (a memfd design).
 * One thread, buffers warm; prints a table (median and range of REPEATS timings of 20 folds).
 * Build and run: gcc -O2 -o fold_copy bench/fold_copy.c && ./fold_copy [repeats] [block KiB] */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kFloats = 4194304, kChunkFloats = 262144, kFolds = 20 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fold(const float* restrict x, const float* restrict a, float* restrict y, size_t n) {
  for (size_t j = 0; j < n; ++j) y[j] = 0.5f * x[j] + 0.5f * a[j];
}

static void read_from(pid_t pid, const float* from, float* to, size_t floats) {
  struct iovec local = {to, floats * 4}, remote = {(void*)from, floats * 4};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)(floats * 4)) {
    perror("process_vm_readv (needs ptrace access to a child: check kernel.yama.ptrace_scope)");
    exit(1);
  }
}

/* ms per fold of the whole buffer, copying `piece` floats at a time (0: no copy, `theirs` is
 * mapped here). */
static double time_folds(pid_t pid, const float* theirs, const float* self, float* out, float* buf, size_t piece) {
  const double start = now();
  for (int r = 0; r < kFolds; ++r) {
    if (piece == 0) {
      fold(self, theirs, out, kFloats);
      continue;
    }
    for (size_t c = 0; c < kFloats; c += piece) {
      read_from(pid, theirs + c, buf, piece);
      fold(self + c, buf, out + c, piece);
    }
  }
  return (now() - start) * 1e3 / kFolds;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? atoi(argv[1]) : 7;
  const size_t block = (argc > 2 ? (size_t)atoi(argv[2]) : 128) * 256; /* KiB -> floats */
  if (repeats < 1 || repeats > 100 || block == 0 || kFloats % block != 0) {
    fprintf(stderr, "usage: fold_copy [repeats 1..100] [block KiB, a power of two up to 16384]\n");
    return 2;
  }
  const size_t bytes = (size_t)kFloats * 4;
  float* theirs = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  float* lent = malloc(bytes); /* the child's private copy of its values, at this address there */
  float* self = malloc(bytes);
  float* out = malloc(bytes);
  float* buf = malloc((size_t)kChunkFloats * 4 > block * 4 ? (size_t)kChunkFloats * 4 : block * 4);
  if (theirs == MAP_FAILED || !lent || !self || !out || !buf) return 1;
  for (size_t i = 0; i < kFloats; ++i) self[i] = (float)(i % 1000), out[i] = 0;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) { /* the lender: writes its values once, then waits to be killed */
    for (size_t i = 0; i < kFloats; ++i) theirs[i] = lent[i] = (float)(i % 777);
    for (;;) pause();
  }
  usleep(200000); /* the child's values written (a shared mapping: visible here too) */
  const char* ways[3] = {"1 MiB chunk copied, then folded (today)", "block copied, folded in cache", "no copy: folded from shared memory"};
  const size_t pieces[3] = {kChunkFloats, block, 0};
  double ms[3][100];
  for (int r = 0; r < repeats; ++r)
    for (int w = 0; w < 3; ++w) ms[w][r] = time_folds(child, w < 2 ? lent : theirs, self, out, buf, pieces[w]);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  for (int w = 0; w < 3; ++w) qsort(ms[w], repeats, sizeof(double), by_value);
  printf("| way (16.8 MB, one thread, block %zu KiB) | ms median | range | x today |\n|---|---|---|---|\n", block / 256);
  for (int w = 0; w < 3; ++w)
    printf("| %s | %.2f | %.2f..%.2f | %.2f |\n", ways[w], ms[w][repeats / 2], ms[w][0], ms[w][repeats - 1],
           ms[w][repeats / 2] / ms[0][repeats / 2]);
  printf("(check %g)\n", out[12345]);
  return 0;
}
