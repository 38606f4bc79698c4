// The one wire format of gossip (after leveldb's log_format.h / coding.h). Every message is two
// ZeroMQ frames: a fixed 64-byte little-endian header, then the payload (values of the header's
// dtype — float32 or bfloat16 —, text padded to whole words, or a LentRef; values are sent
// zero-copy from the sender's buffer). Large buffers travel as several chunks, each a message
// whose header says where its values go (offset) in a vector of `total_floats`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace gossip::peer {

inline constexpr uint32_t kMagic = 0x50535347;  // "GSSP" read as little-endian bytes
// 2: elastic membership messages; 3: bf16 payloads; 4: lent payloads (flags) and kLentDone;
// 5: lent references name a shared region (memfd) the reader may map; 6: unchecked payloads.
inline constexpr uint16_t kProtocolVersion = 6;
inline constexpr size_t kHeaderBytes = 64;
// A chunk's payload is at most this many bytes unless configured (algorithm.chunk_bytes): 4 MiB
// means fewer messages, wake-ups and thread hops per exchange than 1 MiB, each exchange round 4-18 %
// faster by measurement (docs/benchmarks.md, 2026-12-07).
inline constexpr size_t kChunkBytes = 4 << 20;

enum class MessageKind : uint16_t {
  kGossip = 1,         // x of a symmetric/doubly-stochastic mixing round
  kPushSum = 2,        // (p·x, p·w) of a push-sum round; weight carries p·w
  kReduceScatter = 3,  // ring all-reduce, first half; tag = step
  kAllGather = 4,      // ring all-reduce, second half; tag = step
  kControlRequest = 5, // a tool asks a peer something; tag = ControlOp, payload = JSON text
  kControlReply = 6,   // the answer; weight = 1 when the payload is floats, 0 when JSON text
  kHeartbeat = 7,      // empty; tells a member the sender is alive (tag: ProbeTag); a beat's
                       // round is the sender's settings digest (0: none)
  kView = 8,           // a view-change proposal (text: round, gone ids, joins); epoch = the old one
  kJoin = 9,           // a new peer asks to join (text: its endpoint); from a "j<nonce>" connection
  kWelcome = 10,       // to a joiner: the new view, its id, the start round (text)
  kModel = 11,         // to a joiner: the parameters to start from; round = the start round
  kLentDone = 12,      // a lent payload was copied (tag 0) or could not be (tag 1: send it again); round = token
  kSuspect = 100,      // never on the wire: the comm thread's note that a member fell silent
};
inline constexpr uint16_t kLastWireKind = 12;

// What a kHeartbeat says (its tag): the failure detector's indirect probes (SWIM). A member
// that has not heard from one it watches for a while asks a few others about it (kProbeAsk,
// round = that member's id); each that heard from it lately answers when (kProbeVouch, round =
// the id, weight = seconds since), and one that did not pings it (kProbePing, answered with a
// kBeat) and vouches once it hears back. Peers before these tags took every one as a beat.
enum ProbeTag : uint32_t {
  kBeat = 0,
  kProbeAsk = 1,
  kProbePing = 2,
  kProbeVouch = 3,
};

// Header flags.
inline constexpr uint16_t kFlagLent = 1;  // the payload frame is a LentRef; the values stay with the sender
// The checksum covers the header alone: the vector chunk's values came over a link that keeps
// bytes intact by itself — loopback or ipc:// (they never leave this host's memory) or CurveZMQ
// (each message authenticated by its MAC) — so the CRC pass over them, at both ends, is skipped
// (algorithm.checksum: auto). A receiver takes such a payload only where it agrees the link is
// one of those; NaN, Inf and outliers are still screened where the values are used.
inline constexpr uint16_t kFlagUnchecked = 2;

// Single-copy transfers between peers on one host (algorithm.single_copy): instead of the values
// the payload frame says where they are in the sender's memory, and the receiver copies them out
// with process_vm_readv, then answers kLentDone so the sender may reuse the buffer. The cookie,
// read from the sender's memory and compared, proves that `pid` names the sender as the receiver
// sees it (another host or pid namespace fails the check, and the values then come over the
// socket). header.payload_bytes is the size of the values; the checksum covers the reference.
// Where the values lie in a shared region of the sender (common/shared_memory.h), `inode` is not
// 0 and the receiver may map memfd `fd` of `pid` instead and fold the values from `offset` in
// place, answering kLentDone once it has; it checks the file's inode and seals before it does.
struct LentRef {
  uint64_t pid = 0;
  uint64_t address = 0;         // of the values
  uint64_t token = 0;           // echoed in kLentDone's round
  uint64_t cookie_address = 0;  // of 8 bytes in the sender's memory that must equal `cookie`
  uint64_t cookie = 0;
  uint64_t fd = 0, inode = 0, offset = 0;  // the shared region holding the values (inode 0: none)
};
inline constexpr size_t kLentRefBytes = 64;
void encode_lent_ref(const LentRef& r, uint8_t* out);
LentRef decode_lent_ref(const uint8_t* in);

// What one payload value is (the header's dtype). Gossip and push-sum messages may carry bfloat16
// (the top 16 bits of a float32, rounded to nearest even: half the bytes); everything else is
// float32. CHOCO-SGD's gossip messages may instead carry a compressed span of values
// (algorithms/compressor.h): 4-byte words, the first saying how many values of the vector the
// chunk covers from header.offset (the header's own bounds check covers only offset; the
// decoder checks the span and the rest after the checksum). The ring all-reduce's messages may
// carry int8 chunks (DiLoCo's average with wire: int8).
enum class Dtype : uint32_t {
  kF32 = 0,
  kBf16 = 1,
  kTopK = 2,     // the k largest |v|: k indices, then their k values
  kRandomK = 3,  // k values at indices drawn from the run's seed (no indices on the wire)
  kSign = 4,     // one bit per value and one scale (mean |v|)
  kInt8 = 5,     // one int8 per value, stochastically rounded, and one scale
};
inline constexpr uint32_t kLastDtype = 5;
inline bool is_compressed(Dtype dtype) { return dtype != Dtype::kF32 && dtype != Dtype::kBf16; }
// Bytes per payload element (compressed payloads count 4-byte words).
inline size_t element_bytes(Dtype dtype) { return dtype == Dtype::kBf16 ? 2 : 4; }
std::string dtype_name(Dtype dtype);

// What a control request asks (the header's tag).
enum class ControlOp : uint32_t {
  kStatus = 1,    // {} → status JSON
  kSnapshot = 2,  // {"round": R, "sketch": k, "seed": s} → {"ok": true} or {"error": "..."}
  kFetch = 3,     // {"round": R} → the snapshot's floats, or {"ready": false, ...}
};

// Control payloads are text padded with spaces to a whole number of 4-byte words, so every
// payload keeps the float-sized framing the checks below expect.
std::string pad_text(std::string text);

struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kProtocolVersion;
  MessageKind kind{};          // any 16-bit value once decoded: validate_header checks it
  uint32_t sender = 0;         // rank of the sender
  uint32_t epoch = 0;          // membership epoch the sender is in
  uint64_t round = 0;          // gossip round, or collective sequence number
  uint32_t tag = 0;            // step inside a collective
  uint32_t payload_bytes = 0;  // size of the payload values (the frame's size, unless lent)
  uint64_t total_floats = 0;   // length (in values) of the whole vector this chunk belongs to
  uint64_t offset = 0;         // first value of this chunk inside that vector
  double weight = 0;           // push-sum weight (p·w); 0 elsewhere
  Dtype dtype = Dtype::kF32;   // of the payload values (16 bits on the wire): payload_bytes = values · element_bytes
  uint16_t flags = 0;          // kFlagLent, kFlagUnchecked, or 0
  uint32_t checksum = 0;       // CRC32C of header bytes [0, 60) then the payload frame (unless kFlagUnchecked)
};

// Fixed-width little-endian encoding; `out` must hold kHeaderBytes.
void encode_header(const Header& h, uint8_t* out);
Header decode_header(const uint8_t* in);

// CRC32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2.
uint32_t crc32c(const void* data, size_t bytes, uint32_t seed = 0);
// The same, always by table lookup (to check the hardware path against).
uint32_t crc32c_portable(const void* data, size_t bytes, uint32_t seed = 0);

// Checksum of a payload: the payload is cut into three equal stripes (multiples of 8 bytes; the
// tail goes with the third), each stripe gets its own CRC32C, and the result is the CRC32C of the
// three stripe CRCs (12 little-endian bytes) seeded with `seed`. Three independent stripes let
// the CPU overlap the CRC instruction's latency, about 3x faster than one stream.
// What the checksum's pass also finds out about a payload of floats, block by block while each
// block is still in L1: whether every value is finite and the sum of their squares (for the
// gossip outlier screen; meaningless when not finite).
struct FloatScan {
  bool finite = true;
  double sum_squares = 0;
};
// The same scan on its own, for values that came without a checksum (in-process transports).
FloatScan float_scan(const float* v, size_t n);
// The scan of a payload of `bytes` holding values of `dtype` (bf16 values are widened exactly);
// a compressed payload is not scanned here (finite, 0: its decoder screens the values).
FloatScan payload_scan(const void* payload, size_t bytes, Dtype dtype);

// With `scan`, also scans the values (of `dtype`) in the same pass.
uint32_t payload_checksum(const void* data, size_t bytes, uint32_t seed, FloatScan* scan = nullptr,
                          Dtype dtype = Dtype::kF32);

// Computes the checksum over the encoded header (minus its checksum field) and the payload (a
// scan reads the values as header.dtype says); with kFlagUnchecked over the header alone (a scan
// still reads the values).
uint32_t message_checksum(const Header& h, const void* payload, size_t payload_bytes, FloatScan* scan = nullptr);

// Why a received header is rejected, or nullopt when it is well formed: sizes, magic, version,
// kind and chunk bounds — everything but the checksum, which costs a pass over the payload and is
// checked by the consumer right before it uses the (then cache-hot) values.
// `frame_bytes` is the payload frame's size (kLentRefBytes for a lent payload).
std::optional<std::string> validate_header(const void* header, size_t header_bytes, size_t frame_bytes,
                                           Header* decoded);
bool checksum_matches(const Header& h, const void* payload, size_t payload_bytes, FloatScan* scan = nullptr);

// validate_header plus the checksum. The caller checks what depends on the run (sender, model size).
std::optional<std::string> validate_message(const void* header, size_t header_bytes, const void* payload,
                                            size_t payload_bytes, Header* decoded);

std::string kind_name(MessageKind kind);
// Kinds whose messages are chunks of a float vector (the only ones that may be lent).
bool is_vector_kind(MessageKind kind);

}  // namespace gossip::peer
