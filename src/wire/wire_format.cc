#include "wire/wire_format.h"

#include <cstring>

#include "common/cpu_features.h"

namespace gossip::peer {
namespace {

static_assert(sizeof(double) == 8 && sizeof(float) == 4, "wire format assumes IEEE-754 sizes");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "payload floats travel in host order: little-endian only");

template <typename T>
void put(uint8_t*& p, T v) {
  std::memcpy(p, &v, sizeof(T));  // little-endian host (asserted above)
  p += sizeof(T);
}
template <typename T>
T get(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

uint32_t crc_table[8][256];
bool make_table() {
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int t = 1; t < 8; ++t) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
  return true;
}
const bool table_ready = make_table();

uint32_t crc32c_soft(const uint8_t* p, size_t n, uint32_t crc) {
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = crc_table[7][v & 0xFF] ^ crc_table[6][(v >> 8) & 0xFF] ^ crc_table[5][(v >> 16) & 0xFF] ^
          crc_table[4][(v >> 24) & 0xFF] ^ crc_table[3][(v >> 32) & 0xFF] ^ crc_table[2][(v >> 40) & 0xFF] ^
          crc_table[1][(v >> 48) & 0xFF] ^ crc_table[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
  return crc;
}

// Scans the values of p[0, bytes): float32 (Word = uint32_t) or bfloat16 (Word = uint16_t, the
// top half of a float32, widened exactly); adds their squares to *sum_squares and returns true
// when one is NaN or ±Inf. The test: a float's exponent bits plus one exponent unit set bit 31
// exactly when the exponent was all ones; OR-ed over the block and tested once at the end, so the
// loop has no branch and vectorises (AVX2 where the CPU has it: in the checksum's pass 2.6x the
// throughput of the scalar test it replaced, see the #4 notes; dispatch: common/cpu_features.h).
template <typename Word>
__attribute__((always_inline)) inline bool scan_body(const uint8_t* p, size_t bytes, double* sum_squares) {
  uint32_t acc = 0;
  float sq = 0;
  const size_t n = bytes / sizeof(Word);
#pragma omp simd reduction(| : acc) reduction(+ : sq)
  for (size_t i = 0; i < n; ++i) {
    Word word;
    std::memcpy(&word, p + sizeof(Word) * i, sizeof(Word));
    const uint32_t bits = uint32_t(word) << (32 - 8 * sizeof(Word));
    float v;
    std::memcpy(&v, &bits, 4);
    acc |= (bits & 0x7F800000u) + 0x00800000u;
    sq += v * v;
  }
  *sum_squares += sq;
  return (acc & 0x80000000u) != 0;
}

#if defined(__x86_64__)
template <typename Word>
GOSSIP_TARGET_AVX2 bool scan_avx2(const uint8_t* p, size_t bytes, double* sum_squares) {
  return scan_body<Word>(p, bytes, sum_squares);
}
#endif

template <typename Word>
bool scan_words(const uint8_t* p, size_t bytes, double* sum_squares) {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return scan_avx2<Word>(p, bytes, sum_squares);
#endif
  return scan_body<Word>(p, bytes, sum_squares);
}

// Scans values of `dtype`; true when one is NaN or ±Inf.
bool scan_values(const uint8_t* p, size_t bytes, Dtype dtype, double* sum_squares) {
  return dtype == Dtype::kBf16 ? scan_words<uint16_t>(p, bytes, sum_squares)
                                                      : scan_words<uint32_t>(p, bytes, sum_squares);
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}

// Three stripes of `stripe` bytes each (a multiple of 8), in one loop (raw, un-inverted CRC
// states). With a scan, every block of the three stripes is scanned right after its CRC, while
// it is still in L1. Returns true when some float was not finite.
__attribute__((target("sse4.2"))) bool crc32c_hw3(const uint8_t* p, size_t stripe, uint32_t s[3], double* sum_squares,
                                                  Dtype dtype) {
  constexpr size_t kBlock = 2048;
  uint64_t a = s[0], b = s[1], c = s[2];
  bool bad = false;
  for (size_t start = 0; start < stripe; start += kBlock) {
    const size_t end = std::min(stripe, start + kBlock);
    for (size_t i = start; i < end; i += 8) {
      uint64_t va, vb, vc;
      std::memcpy(&va, p + i, 8);
      std::memcpy(&vb, p + stripe + i, 8);
      std::memcpy(&vc, p + 2 * stripe + i, 8);
      a = __builtin_ia32_crc32di(a, va);
      b = __builtin_ia32_crc32di(b, vb);
      c = __builtin_ia32_crc32di(c, vc);
    }
    if (sum_squares)
      for (int k = 0; k < 3; ++k) bad |= scan_values(p + k * stripe + start, end - start, dtype, sum_squares);
  }
  s[0] = static_cast<uint32_t>(a);
  s[1] = static_cast<uint32_t>(b);
  s[2] = static_cast<uint32_t>(c);
  return bad;
}
#endif

// Raw CRC32C state update (no pre/post inversion).
uint32_t crc32c_raw(const uint8_t* p, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (cpu_has_sse42()) return crc32c_hw(p, n, crc);
#endif
  (void)table_ready;
  return crc32c_soft(p, n, crc);
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t seed) {
  return ~crc32c_raw(static_cast<const uint8_t*>(data), bytes, ~seed);
}

uint32_t crc32c_portable(const void* data, size_t bytes, uint32_t seed) {
  (void)table_ready;
  return ~crc32c_soft(static_cast<const uint8_t*>(data), bytes, ~seed);
}

FloatScan float_scan(const float* v, size_t n) {
  FloatScan scan;
  scan.finite = !scan_words<uint32_t>(reinterpret_cast<const uint8_t*>(v), n * sizeof(float), &scan.sum_squares);
  return scan;
}


FloatScan payload_scan(const void* payload, size_t bytes, Dtype dtype) {
  FloatScan scan;
  if (is_compressed(dtype)) return scan;
  scan.finite = !scan_values(static_cast<const uint8_t*>(payload), bytes, dtype, &scan.sum_squares);
  return scan;
}

uint32_t payload_checksum(const void* data, size_t bytes, uint32_t seed, FloatScan* scan, Dtype dtype) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const size_t stripe = (bytes / 3) & ~size_t(7);
  uint32_t s[3] = {~0u, ~0u, ~0u};
  double sum_squares = 0;
  double* sq = scan && !is_compressed(dtype) ? &sum_squares : nullptr;
  bool bad = false;
#if defined(__x86_64__)
  if (cpu_has_sse42()) {
    bad = crc32c_hw3(p, stripe, s, sq, dtype);
  } else
#endif
  {
    for (int k = 0; k < 3; ++k) s[k] = crc32c_raw(p + k * stripe, stripe, s[k]);
    if (sq) bad = scan_values(p, 3 * stripe, dtype, sq);
  }
  s[2] = crc32c_raw(p + 3 * stripe, bytes - 3 * stripe, s[2]);
  if (scan) {
    if (sq) bad |= scan_values(p + 3 * stripe, bytes - 3 * stripe, dtype, sq);
    scan->finite = !bad;
    scan->sum_squares = sum_squares;
  }
  uint8_t lanes[12];
  for (int k = 0; k < 3; ++k) {
    const uint32_t v = ~s[k];
    std::memcpy(lanes + 4 * k, &v, 4);
  }
  return crc32c(lanes, sizeof(lanes), seed);
}

void encode_header(const Header& h, uint8_t* out) {
  uint8_t* p = out;
  put(p, h.magic);
  put(p, h.version);
  put(p, static_cast<uint16_t>(h.kind));
  put(p, h.sender);
  put(p, h.epoch);
  put(p, h.round);
  put(p, h.tag);
  put(p, h.payload_bytes);
  put(p, h.total_floats);
  put(p, h.offset);
  put(p, h.weight);
  put(p, static_cast<uint16_t>(h.dtype));
  put(p, h.flags);
  put(p, h.checksum);
}
static_assert(4 + 2 + 2 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 2 + 2 + 4 == kHeaderBytes, "header layout is 64 bytes");

void encode_lent_ref(const LentRef& r, uint8_t* out) {
  put(out, r.pid);
  put(out, r.address);
  put(out, r.token);
  put(out, r.cookie_address);
  put(out, r.cookie);
  put(out, r.fd);
  put(out, r.inode);
  put(out, r.offset);
}

LentRef decode_lent_ref(const uint8_t* in) {
  LentRef r;
  r.pid = get<uint64_t>(in);
  r.address = get<uint64_t>(in);
  r.token = get<uint64_t>(in);
  r.cookie_address = get<uint64_t>(in);
  r.cookie = get<uint64_t>(in);
  r.fd = get<uint64_t>(in);
  r.inode = get<uint64_t>(in);
  r.offset = get<uint64_t>(in);
  return r;
}
static_assert(8 * 8 == kLentRefBytes, "a lent reference is 64 bytes");

Header decode_header(const uint8_t* in) {
  const uint8_t* p = in;
  Header h;
  h.magic = get<uint32_t>(p);
  h.version = get<uint16_t>(p);
  h.kind = static_cast<MessageKind>(get<uint16_t>(p));
  h.sender = get<uint32_t>(p);
  h.epoch = get<uint32_t>(p);
  h.round = get<uint64_t>(p);
  h.tag = get<uint32_t>(p);
  h.payload_bytes = get<uint32_t>(p);
  h.total_floats = get<uint64_t>(p);
  h.offset = get<uint64_t>(p);
  h.weight = get<double>(p);
  h.dtype = static_cast<Dtype>(get<uint16_t>(p));
  h.flags = get<uint16_t>(p);
  h.checksum = get<uint32_t>(p);
  return h;
}

uint32_t message_checksum(const Header& h, const void* payload, size_t payload_bytes, FloatScan* scan) {
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  const uint32_t header_crc = crc32c(buf, kHeaderBytes - 4);
  if (!(h.flags & kFlagUnchecked)) return payload_checksum(payload, payload_bytes, header_crc, scan, h.dtype);
  if (scan) *scan = payload_scan(payload, payload_bytes, h.dtype);
  return header_crc;
}

std::optional<std::string> validate_header(const void* header, size_t header_bytes, size_t frame_bytes,
                                           Header* decoded) {
  if (header_bytes != kHeaderBytes)
    return "header frame of " + std::to_string(header_bytes) + " bytes (expected " + std::to_string(kHeaderBytes) + ")";
  Header h = decode_header(static_cast<const uint8_t*>(header));
  if (h.magic != kMagic) return "wrong magic (not a gossip peer?)";
  if (h.version != kProtocolVersion)
    return "protocol version " + std::to_string(h.version) + " (this peer speaks " + std::to_string(kProtocolVersion) + ")";
  const auto kind = static_cast<uint16_t>(h.kind);
  if (kind < static_cast<uint16_t>(MessageKind::kGossip) || kind > kLastWireKind)
    return "unknown message kind " + std::to_string(kind);
  if (h.flags & ~(kFlagLent | kFlagUnchecked)) return "unknown header flags " + std::to_string(h.flags);
  if ((h.flags & kFlagUnchecked) && (!is_vector_kind(h.kind) || (h.flags & kFlagLent)))
    return "an unchecked payload in a " + std::string(h.flags & kFlagLent ? "lent " : "") + kind_name(h.kind) +
           " message (only vector chunks sent as values may skip the checksum)";
  const size_t payload_bytes = h.payload_bytes;
  if (h.flags & kFlagLent) {
    if (!is_vector_kind(h.kind)) return "a lent payload in a " + kind_name(h.kind) + " message";
    if (frame_bytes != kLentRefBytes)
      return "lent payload reference of " + std::to_string(frame_bytes) + " bytes (expected " +
             std::to_string(kLentRefBytes) + ")";
  } else if (h.payload_bytes != frame_bytes) {
    return "payload of " + std::to_string(frame_bytes) + " bytes but header says " + std::to_string(h.payload_bytes);
  }
  if (static_cast<uint32_t>(h.dtype) > kLastDtype)
    return "unknown payload type " + std::to_string(static_cast<uint32_t>(h.dtype));
  const bool mixing = h.kind == MessageKind::kGossip || h.kind == MessageKind::kPushSum ||
                      h.kind == MessageKind::kReduceScatter || h.kind == MessageKind::kAllGather;
  if (h.dtype != Dtype::kF32 && !mixing)
    return dtype_name(h.dtype) + " values in a " + kind_name(h.kind) +
           " message (only gossip, push-sum and all-reduce messages carry them)";
  const bool all_reduce = h.kind == MessageKind::kReduceScatter || h.kind == MessageKind::kAllGather;
  if (is_compressed(h.dtype) && h.kind != MessageKind::kGossip && !(h.dtype == Dtype::kInt8 && all_reduce))
    return dtype_name(h.dtype) + " values in a " + kind_name(h.kind) +
           " message (only CHOCO's gossip carries them, and all-reduces int8)";
  if (payload_bytes % element_bytes(h.dtype) != 0)
    return "payload is not a whole number of " +
           (is_compressed(h.dtype) ? "4-byte words (" + dtype_name(h.dtype) + " chunk)" : dtype_name(h.dtype) + " values");
  // A compressed chunk covers a span of the vector its first word names (checked by its decoder).
  const uint64_t count = is_compressed(h.dtype) ? 0 : payload_bytes / element_bytes(h.dtype);
  if (h.offset > h.total_floats || count > h.total_floats - h.offset)
    return "chunk [" + std::to_string(h.offset) + ", +" + std::to_string(count) + ") outside a vector of " +
           std::to_string(h.total_floats);
  *decoded = h;
  return std::nullopt;
}

bool checksum_matches(const Header& h, const void* payload, size_t payload_bytes, FloatScan* scan) {
  return message_checksum(h, payload, payload_bytes, scan) == h.checksum;
}

std::optional<std::string> validate_message(const void* header, size_t header_bytes, const void* payload,
                                            size_t payload_bytes, Header* decoded) {
  Header h;
  if (auto problem = validate_header(header, header_bytes, payload_bytes, &h)) return problem;
  if (!checksum_matches(h, payload, payload_bytes)) return "checksum mismatch";
  *decoded = h;
  return std::nullopt;
}

std::string pad_text(std::string text) {
  while (text.size() % 4) text.push_back(' ');
  return text;
}

std::string dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32: return "f32";
    case Dtype::kBf16: return "bf16";
    case Dtype::kTopK: return "top-k";
    case Dtype::kRandomK: return "random-k";
    case Dtype::kSign: return "sign";
    case Dtype::kInt8: return "int8";
  }
  return "payload type " + std::to_string(static_cast<uint32_t>(dtype));
}

bool is_vector_kind(MessageKind kind) {
  switch (kind) {
    case MessageKind::kGossip:
    case MessageKind::kPushSum:
    case MessageKind::kReduceScatter:
    case MessageKind::kAllGather:
    case MessageKind::kModel: return true;
    default: return false;
  }
}

std::string kind_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::kGossip: return "gossip";
    case MessageKind::kPushSum: return "push-sum";
    case MessageKind::kReduceScatter: return "reduce-scatter";
    case MessageKind::kAllGather: return "all-gather";
    case MessageKind::kControlRequest: return "control request";
    case MessageKind::kControlReply: return "control reply";
    case MessageKind::kHeartbeat: return "heartbeat";
    case MessageKind::kView: return "view change";
    case MessageKind::kJoin: return "join request";
    case MessageKind::kWelcome: return "welcome";
    case MessageKind::kModel: return "model transfer";
    case MessageKind::kLentDone: return "lent-done";
    case MessageKind::kSuspect: return "suspicion";
  }
  return "kind " + std::to_string(static_cast<uint16_t>(kind));
}

}  // namespace gossip::peer
