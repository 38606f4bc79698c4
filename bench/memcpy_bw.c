/* memcpy bandwidth of one thread: the bound for every copy a byte takes on its way between two
 * peers on this machine (user -> socket buffer -> user). Prints
 * "memcpy bytes <b> GB/s <x>" for a buffer that fits in cache and one that does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  const size_t sizes[] = {1u << 20, 16777216u};
  for (int s = 0; s < 2; ++s) {
    const size_t bytes = sizes[s];
    char* a = malloc(bytes);
    char* b = malloc(bytes);
    if (!a || !b) return 1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    const int reps = (int)((2048u << 20) / bytes);
    double start = now();
    for (int r = 0; r < reps; ++r) {
      memcpy(r % 2 ? a : b, r % 2 ? b : a, bytes);
    }
    const double secs = now() - start;
    printf("memcpy bytes %zu GB/s %.1f (check %d)\n", bytes, reps * (double)bytes / secs / 1e9, a[bytes / 2] + b[7]);
    free(a);
    free(b);
  }
  return 0;
}
