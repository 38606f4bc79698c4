// Building blocks over a Transport: chunked vector send/receive, a pool of send snapshots, and the
// ring all-reduce (reduce-scatter + all-gather) the peers run among themselves — no server.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "algorithms/compressor.h"
#include "common/error.h"
#include "transport/transport.h"

namespace gossip::peer {

// Reusable host buffers for outgoing data. A buffer is reused once the transport has released
// every reference to it, so steady-state rounds allocate nothing.
class SnapshotPool {
 public:
  // A buffer of n floats for the caller to fill (contents undefined).
  std::shared_ptr<std::vector<float>> buffer(size_t n);
  // The same for n bf16 values.
  std::shared_ptr<std::vector<uint16_t>> bf16_buffer(size_t n);

 private:
  std::vector<std::shared_ptr<std::vector<float>>> buffers_;
  std::vector<std::shared_ptr<std::vector<uint16_t>>> bf16_buffers_;
};

struct VectorRef {
  MessageKind kind;
  uint64_t round;
  uint32_t tag = 0;
  Dtype dtype = Dtype::kF32;  // what the values travel as (bf16: gossip, push-sum, DiLoCo's average)
};

// Sends data[0, count) — elements [offset, offset + count) of a vector of `total` values of
// ref.dtype (float or uint16_t bf16) — to `peer`, as chunks of at most `chunk_floats` values,
// zero-copy: `owner` keeps data alive and unchanged until the transport releases it. A
// zero-length vector still sends one message.
void send_vector(Transport& t, int peer, const VectorRef& ref, const void* data, Owner owner, size_t offset,
                 size_t count, size_t total, double weight, size_t chunk_floats);
// The same vector to several peers; each chunk's checksum is computed once for all of them.
void send_vector(Transport& t, const std::vector<int>& peers, const VectorRef& ref, const void* data, Owner owner,
                 size_t offset, size_t count, size_t total, double weight, size_t chunk_floats);

// A token to pass as the Owner of a buffer the caller owns: wait_released() returns once the
// transport has dropped every copy (the bytes have left), or throws after timeout_s.
class SendGuard {
 public:
  SendGuard();
  // Left by an exception before wait_released(): still give the transport a moment to finish
  // with the buffer before the caller frees it (best effort, bounded).
  ~SendGuard();
  SendGuard(const SendGuard&) = delete;
  SendGuard& operator=(const SendGuard&) = delete;
  Owner owner() const { return token_; }
  void wait_released(double timeout_s, const std::string& what);

 private:
  // Set (release) by the token's deleter, on whichever thread drops the last copy, and read
  // (acquire) by the waiter: the transport's last read of the buffer happens-before our reuse.
  struct Released {
    std::atomic<bool> done{false};
  };
  std::shared_ptr<Released> released_;
  std::shared_ptr<char> token_;
};

// The error when no `kind` message of `round` came from `peer` within timeout_s: the neighbour
// is dead, hung or far behind — or set up differently, when the transport dropped what it sent
// (Transport::dropped_from: how many and why the last was).
PeerLost no_message_from(const Transport& t, MessageKind kind, int peer, uint64_t round, double timeout_s);
// The error when a verified chunk from `peer` is of a vector of `theirs` values where this peer's
// has `ours`: the peers' models differ in size, so no round with it can ever complete.
Error vector_of_another_length(const Transport& t, int peer, MessageKind kind, uint64_t theirs, size_t ours);

// Receives the chunks of [offset, offset + count) of a vector of `total` values from `peer` and
// calls fold(index, values, n) for each, index relative to `offset`. A chunk whose checksum
// does not match is logged and dropped (the genuine one may still come). Throws gossip::Error
// naming the peer when nothing arrives before `timeout_s` passes, or when a verified chunk is of
// a vector of another length (the peers' models differ).
// Chunks holding NaN or ±Inf are reported and not folded; `finite` then comes back false.
struct Received {
  double weight = 0;   // the sender's weight field (0 when it was not finite)
  bool finite = true;  // every chunk was folded
};
Received receive_vector(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, size_t total,
                        double timeout_s, const std::function<void(size_t, const float*, size_t)>& fold);
// The same for a consumer that reads the chunks itself (bf16 values, header.offset): fold(m) for
// every verified, finite chunk.
Received receive_vector(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, size_t total,
                        double timeout_s, const std::function<void(const InMessage&)>& fold);

// Receives chunk after chunk of one vector from one peer (the chunk-at-a-time form of
// receive_vector), so a consumer can walk several peers' vectors in step.
class ChunkReader {
 public:
  ChunkReader(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, size_t total,
              double timeout_s);
  // The next verified chunk (values at [offset + index, + count) of the vector); nullopt once the
  // whole vector has been read. A chunk holding NaN or ±Inf comes back with finite = false and is
  // reported once per vector, naming the sender; the caller decides not to mix it in. A verified
  // chunk whose values are not of ref.dtype (peers configured with different algorithm.wire), or
  // of a vector whose length is not `total` (peers with models of different sizes), is an error
  // naming the sender and both figures.
  std::optional<InMessage> next();
  // With a deferred scan, a chunk that needs no checksum (lent, or in-process) comes back from
  // next() unscanned (scanned = false, finite = true): the caller scans its values in its own
  // single pass over them (the gossip fold) and must call settle() with the result before it
  // trusts the mix — and mix it again without the chunk when settle() finds it not finite. Such a
  // chunk may be shared (InMessage::shared: its sender can still write it), so a second pass over
  // it must check again what it reads; every other chunk comes back private.
  void defer_scan() { defer_scan_ = true; }
  // Records a scan of m's values: finite, Σ value², the once-per-vector report of NaN/Inf.
  void settle(InMessage& m, const FloatScan& scan);
  size_t position() const { return got_; }  // floats read so far
  double weight() const { return weight_; }

 private:
  Transport* t_;  // outlives the reader (stack object inside one step)
  int peer_;
  MatchKey key_;
  Dtype dtype_;
  size_t offset_, count_, total_;
  Clock::time_point deadline_;
  double timeout_s_;
  size_t got_ = 0;
  bool any_ = false;
  bool reported_ = false;
  bool defer_scan_ = false;
  double weight_ = 0;
};

class RingAllReduce {
 public:
  // `seed`: the run's seed, from which the int8 wire draws its stochastic rounding.
  RingAllReduce(Transport& transport, size_t chunk_floats, double timeout_s, uint64_t seed = 1)
      : t_(&transport), chunk_floats_(std::max<size_t>(1, chunk_floats)), timeout_s_(timeout_s),
        int8_block_(std::min(chunk_floats_, kInt8Block)), int8_{Dtype::kInt8, 0, seed} {}
  // int8 wire: values per scale (and per message), unless chunk_floats is smaller.
  static constexpr size_t kInt8Block = 4096;
  // x ← Σ_peers x, in place. Every peer must call it with the same n and wire, in the same order.
  // The result is bitwise identical on every peer. wire = bf16: every value travels rounded to
  // bfloat16 (half the bytes): each partial sum is rounded on its way round the ring (p − 1
  // roundings in the reduce-scatter) and the owner of a finished segment rounds it once more and
  // keeps the rounded value too, so every peer still holds the same result. wire = int8 (a quarter
  // of the bytes): the same with each block of kInt8Block values quantised to int8 with its own
  // scale (max |v| / 127) and unbiased stochastic rounding drawn from (seed, call, sender,
  // offset); in the all-gather each peer forwards the owner's int8 chunks as they came.
  void sum(float* x, size_t n, Dtype wire = Dtype::kF32);
  // x ← (1/n_peers)·Σ_peers x.
  void average(float* x, size_t n, Dtype wire = Dtype::kF32);

 private:
  // One phase of the ring: p − 1 steps, each sending segment send_seg(s) to the next peer and
  // folding segment recv_seg(s) from the previous one (added in the reduce-scatter, copied in the
  // all-gather).
  void ring_phase(float* x, size_t n, Dtype wire, MessageKind kind, uint64_t seq);
  // int8 wire: quantises segment `seg` of x into int8_words_[seg], chunk by chunk; `keep`: x takes
  // the values the receivers will decode.
  void encode_int8(float* x, size_t n, int seg, uint64_t seq, bool keep);
  // Sends int8_words_[seg] to the next peer.
  void send_int8(const VectorRef& ref, int seg, size_t n, const Owner& owner);
  // Receives segment `seg` from the previous peer: added to x (reduce-scatter), or written into x
  // and its chunks kept in int8_words_[seg] to forward (all-gather).
  void receive_int8(float* x, size_t n, const VectorRef& ref, int seg);

  Transport* t_;  // owned by the peer's Node (or a test), outlives every algorithm object
  size_t chunk_floats_;
  double timeout_s_;
  size_t int8_block_;
  uint64_t sequence_ = 0;  // collective number: matches messages of the same call across peers
  std::vector<uint16_t> rounded_;  // bf16 wire: the values being sent, released within each phase
  Compressor int8_;                // int8 wire: the quantiser
  std::vector<std::vector<std::vector<uint32_t>>> int8_words_;  // [segment][chunk]: its encoded chunks
  std::vector<float> int8_decoded_;
  std::vector<uint32_t> int8_scratch_;
  CompressedChunk int8_chunk_;
};

}  // namespace gossip::peer
