#include "peer/wire_format.h"

#include <cstring>

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

// Non-zero when either float of an 8-byte word is NaN or ±Inf (its exponent bits all ones).
inline uint64_t non_finite_pair(uint64_t v) {
  const uint64_t x = (v & 0x7F8000007F800000ull) ^ 0x7F8000007F800000ull;
  return static_cast<uint64_t>(static_cast<uint32_t>(x) == 0) | static_cast<uint64_t>((x >> 32) == 0);
}

// Three stripes of `stripe` bytes each, in one loop (raw, un-inverted CRC states). With
// kCheck, the same loads also test every float for NaN/Inf: nearly free, since the loop waits on
// the CRC instruction's latency anyway. Returns true when some float was not finite.
template <bool kCheck>
__attribute__((target("sse4.2"))) bool crc32c_hw3(const uint8_t* p, size_t stripe, uint32_t s[3]) {
  uint64_t a = s[0], b = s[1], c = s[2], bad = 0;
  for (size_t i = 0; i < stripe; i += 8) {
    uint64_t va, vb, vc;
    std::memcpy(&va, p + i, 8);
    std::memcpy(&vb, p + stripe + i, 8);
    std::memcpy(&vc, p + 2 * stripe + i, 8);
    a = __builtin_ia32_crc32di(a, va);
    b = __builtin_ia32_crc32di(b, vb);
    c = __builtin_ia32_crc32di(c, vc);
    if constexpr (kCheck) bad |= non_finite_pair(va) | non_finite_pair(vb) | non_finite_pair(vc);
  }
  s[0] = static_cast<uint32_t>(a);
  s[1] = static_cast<uint32_t>(b);
  s[2] = static_cast<uint32_t>(c);
  return bad != 0;
}
const bool have_sse42 = __builtin_cpu_supports("sse4.2");
#endif

// Raw CRC32C state update (no pre/post inversion).
uint32_t crc32c_raw(const uint8_t* p, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (have_sse42) return crc32c_hw(p, n, crc);
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

// True when some float of p[0, bytes) is NaN or ±Inf (bytes a multiple of 4).
bool any_non_finite(const uint8_t* p, size_t bytes) {
  uint32_t bad = 0;
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t bits;
    std::memcpy(&bits, p + i, 4);
    bad |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return bad != 0;
}

bool all_finite(const float* v, size_t n) {
  return !any_non_finite(reinterpret_cast<const uint8_t*>(v), n * sizeof(float));
}

uint32_t payload_checksum(const void* data, size_t bytes, uint32_t seed, bool* finite) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const size_t stripe = (bytes / 3) & ~size_t(7);
  uint32_t s[3] = {~0u, ~0u, ~0u};
  bool bad = false;
#if defined(__x86_64__)
  if (have_sse42) {
    bad = finite ? crc32c_hw3<true>(p, stripe, s) : crc32c_hw3<false>(p, stripe, s);
  } else
#endif
  {
    for (int k = 0; k < 3; ++k) s[k] = crc32c_raw(p + k * stripe, stripe, s[k]);
    if (finite) bad = any_non_finite(p, 3 * stripe);
  }
  s[2] = crc32c_raw(p + 3 * stripe, bytes - 3 * stripe, s[2]);
  if (finite) *finite = !bad && !any_non_finite(p + 3 * stripe, bytes - 3 * stripe);
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
  put(p, h.kind);
  put(p, h.sender);
  put(p, h.epoch);
  put(p, h.round);
  put(p, h.tag);
  put(p, h.payload_bytes);
  put(p, h.total_floats);
  put(p, h.offset);
  put(p, h.weight);
  put(p, h.reserved);
  put(p, h.checksum);
}
static_assert(4 + 2 + 2 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4 == kHeaderBytes, "header layout is 64 bytes");

Header decode_header(const uint8_t* in) {
  const uint8_t* p = in;
  Header h;
  h.magic = get<uint32_t>(p);
  h.version = get<uint16_t>(p);
  h.kind = get<uint16_t>(p);
  h.sender = get<uint32_t>(p);
  h.epoch = get<uint32_t>(p);
  h.round = get<uint64_t>(p);
  h.tag = get<uint32_t>(p);
  h.payload_bytes = get<uint32_t>(p);
  h.total_floats = get<uint64_t>(p);
  h.offset = get<uint64_t>(p);
  h.weight = get<double>(p);
  h.reserved = get<uint32_t>(p);
  h.checksum = get<uint32_t>(p);
  return h;
}

uint32_t message_checksum(const Header& h, const void* payload, size_t payload_bytes, bool* finite) {
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  return payload_checksum(payload, payload_bytes, crc32c(buf, kHeaderBytes - 4), finite);
}

std::optional<std::string> validate_header(const void* header, size_t header_bytes, size_t payload_bytes,
                                           Header* decoded) {
  if (header_bytes != kHeaderBytes)
    return "header frame of " + std::to_string(header_bytes) + " bytes (expected " + std::to_string(kHeaderBytes) + ")";
  Header h = decode_header(static_cast<const uint8_t*>(header));
  if (h.magic != kMagic) return "wrong magic (not a gossip peer?)";
  if (h.version != kProtocolVersion)
    return "protocol version " + std::to_string(h.version) + " (this peer speaks " + std::to_string(kProtocolVersion) + ")";
  if (h.kind < static_cast<uint16_t>(MessageKind::kGossip) || h.kind > kLastWireKind)
    return "unknown message kind " + std::to_string(h.kind);
  if (h.payload_bytes != payload_bytes)
    return "payload of " + std::to_string(payload_bytes) + " bytes but header says " + std::to_string(h.payload_bytes);
  if (payload_bytes % sizeof(float) != 0) return "payload is not a whole number of floats";
  const uint64_t count = payload_bytes / sizeof(float);
  if (h.offset > h.total_floats || count > h.total_floats - h.offset)
    return "chunk [" + std::to_string(h.offset) + ", +" + std::to_string(count) + ") outside a vector of " +
           std::to_string(h.total_floats);
  *decoded = h;
  return std::nullopt;
}

bool checksum_matches(const Header& h, const void* payload, size_t payload_bytes, bool* finite) {
  return message_checksum(h, payload, payload_bytes, finite) == h.checksum;
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

std::string kind_name(uint16_t kind) {
  switch (static_cast<MessageKind>(kind)) {
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
    case MessageKind::kSuspect: return "suspicion";
  }
  return "kind " + std::to_string(kind);
}

}  // namespace gossip::peer
