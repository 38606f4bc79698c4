// CPU features for the kernels with an AVX2 variant (bf16 conversion in kernels/, the checksum's
// float scan in wire/, the gossip fold in algorithms/) and the CRC32C instruction. Dispatched by
// hand: each such kernel is one always-inline body compiled into a plain function and a
// GOSSIP_TARGET_AVX2 one, and the caller picks with cpu_has_avx2(). Not with target_clones: an
// ifunc resolver runs before ThreadSanitizer's runtime and crashes it.
#pragma once

#if defined(__x86_64__)
#define GOSSIP_TARGET_AVX2 __attribute__((target("avx2")))
#endif

namespace gossip {

#if defined(__x86_64__)
inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
inline bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#else
inline bool cpu_has_avx2() { return false; }
inline bool cpu_has_sse42() { return false; }
#endif

}  // namespace gossip
