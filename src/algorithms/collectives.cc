#include "algorithms/collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "kernels/bf16.h"

namespace gossip::peer {


namespace {

template <typename T>
std::shared_ptr<std::vector<T>> reuse(std::vector<std::shared_ptr<std::vector<T>>>& buffers, size_t n) {
  std::shared_ptr<std::vector<T>> buf;
  for (auto& b : buffers)
    if (b.use_count() == 1) {  // only the pool holds it: the transport is done with it
      buf = b;
      break;
    }
  if (!buf) {
    buf = std::make_shared<std::vector<T>>();
    buffers.push_back(buf);
  }
  buf->resize(n);
  return buf;
}

}  // namespace

std::shared_ptr<std::vector<float>> SnapshotPool::buffer(size_t n) { return reuse(buffers_, n); }

std::shared_ptr<std::vector<uint16_t>> SnapshotPool::bf16_buffer(size_t n) { return reuse(bf16_buffers_, n); }

SendGuard::SendGuard() : released_(std::make_shared<Released>()) {
  token_ = std::shared_ptr<char>(new char(0), [r = released_](char* p) {
    delete p;
    r->done.store(true, std::memory_order_release);
  });
}

SendGuard::~SendGuard() {
  if (!token_) return;
  token_.reset();
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!released_->done.load(std::memory_order_acquire) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void SendGuard::wait_released(double timeout_s, const std::string& what) {
  token_.reset();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  while (!released_->done.load(std::memory_order_acquire)) {
    if (Clock::now() > deadline) throw PeerLost(what, "a send did not complete within " + number_text(timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void send_vector(Transport& t, int peer, const VectorRef& ref, const void* data, Owner owner, size_t offset,
                 size_t count, size_t total, double weight, size_t chunk_floats) {
  send_vector(t, std::vector<int>{peer}, ref, data, std::move(owner), offset, count, total, weight, chunk_floats);
}

void send_vector(Transport& t, const std::vector<int>& peers, const VectorRef& ref, const void* data, Owner owner,
                 size_t offset, size_t count, size_t total, double weight, size_t chunk_floats) {
  if (peers.empty()) return;
  size_t done = 0;
  do {
    const size_t c = std::min(chunk_floats, count - done);
    OutMessage m;
    m.header.kind = ref.kind;
    m.header.round = ref.round;
    m.header.tag = ref.tag;
    m.header.total_floats = total;
    m.header.offset = offset + done;
    m.header.weight = weight;
    m.header.dtype = ref.dtype;
    m.data = static_cast<const char*>(data) + done * element_bytes(m.header.dtype);
    m.count = c;
    m.owner = owner;
    t.send_to_each(peers, m);
    done += c;
  } while (done < count);
}

ChunkReader::ChunkReader(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, size_t total,
                         double timeout_s)
    : t_(&t),
      peer_(peer),
      key_{ref.kind, peer, ref.round, ref.tag},
      dtype_(ref.dtype),
      offset_(offset),
      count_(count),
      total_(total),
      deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))),
      timeout_s_(timeout_s) {}

PeerLost no_message_from(const Transport& t, MessageKind kind, int peer, uint64_t round, double timeout_s) {
  const std::string dropped = t.dropped_from(peer);
  return PeerLost("peer " + std::to_string(t.rank()),
                  "no " + kind_name(kind) + " message from " + t.describe(peer) + " for round " +
                      std::to_string(round) + " within " + number_text(timeout_s) +
                      " s: the neighbour is dead, hung or far behind" +
                      (dropped.empty() ? "" : ", or set up differently: " + dropped));
}

Error vector_of_another_length(const Transport& t, int peer, MessageKind kind, uint64_t theirs, size_t ours) {
  return Error("peer " + std::to_string(t.rank()),
               t.describe(peer) + " sends " + kind_name(kind) + " vectors of " + std::to_string(theirs) +
                   " values but this peer's has " + std::to_string(ours) +
                   ": the peers' models differ in size (every peer of a run needs the same model)");
}

std::optional<InMessage> ChunkReader::next() {
  while (!any_ || got_ < count_) {
    std::optional<InMessage> m = t_->receive(key_, deadline_);
    if (!m) throw no_message_from(*t_, key_.kind, peer_, key_.round, timeout_s_);
    FloatScan scan;
    if (!m->verified && !checksum_matches(m->header, m->data, m->bytes(), &scan)) {
      log("peer ", t_->rank(), ": dropped a ", kind_name(m->header.kind), " chunk claiming to be from ",
          t_->describe(peer_), ": checksum mismatch");
      continue;
    }
    if (m->header.total_floats != total_)
      throw vector_of_another_length(*t_, peer_, m->header.kind, m->header.total_floats, total_);
    const uint64_t begin = m->header.offset;
    if (begin != offset_ + got_ || m->count > count_ - got_) {
      log("peer ", t_->rank(), ": dropped a chunk [", begin, ", +", m->count, ") claiming to be from ",
          t_->describe(peer_), ": expected one starting at ", offset_ + got_);
      continue;
    }
    if (m->header.dtype != dtype_)
      throw Error("peer " + std::to_string(t_->rank()),
                  t_->describe(peer_) + " sends " + kind_name(m->header.kind) + " values as " +
                      dtype_name(m->header.dtype) + " but this peer expects " +
                      dtype_name(dtype_) + ": the peers' algorithm.wire settings differ");
    if (!any_) weight_ = m->header.weight;
    any_ = true;
    got_ += m->count;
    // Checked in the checksum's pass when the chunk came off the network, else here (or, deferred,
    // in the caller's pass).
    if (m->verified && defer_scan_ && !is_compressed(m->header.dtype)) {
      m->scanned = false;
      return m;
    }
    privatize(*m);  // values the sender may still write are checked and used as one copy
    if (m->verified) scan = payload_scan(m->data, m->bytes(), m->header.dtype);
    settle(*m, scan);
    return m;
  }
  return std::nullopt;
}

void ChunkReader::settle(InMessage& m, const FloatScan& scan) {
  m.scanned = true;
  m.finite = scan.finite && std::isfinite(m.header.weight);
  m.sum_squares = scan.sum_squares;
  if (!m.finite && !reported_) {
    reported_ = true;
    log("peer ", t_->rank(), ": ", t_->describe(peer_), " sent NaN or Inf values in its ", kind_name(m.header.kind),
        " message of round ", key_.round, ": not mixed in");
  }
}

Received receive_vector(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, size_t total,
                        double timeout_s, const std::function<void(const InMessage&)>& fold) {
  ChunkReader reader(t, peer, ref, offset, count, total, timeout_s);
  Received r;
  while (std::optional<InMessage> m = reader.next()) {
    if (m->finite) fold(*m);
    else r.finite = false;
  }
  r.weight = std::isfinite(reader.weight()) ? reader.weight() : 0.0;
  return r;
}

Received receive_vector(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, size_t total,
                        double timeout_s, const std::function<void(size_t, const float*, size_t)>& fold) {
  return receive_vector(t, peer, ref, offset, count, total, timeout_s,
                        [&](const InMessage& m) { fold(m.header.offset - offset, m.data, m.count); });
}

namespace {
// Where segment i of p starts in a vector of n values (segment p ends at n).
size_t segment_begin(size_t n, int i, int p) { return n * static_cast<size_t>(i) / static_cast<size_t>(p); }
}  // namespace

void RingAllReduce::sum(float* x, size_t n, Dtype wire) {
  const int p = t_->size(), r = t_->rank();
  const uint64_t seq = sequence_++;
  if (p == 1) return;
  if (wire == Dtype::kBf16) rounded_.resize(n);
  if (wire == Dtype::kInt8) int8_words_.resize(p);
  // Reduce-scatter: after p−1 steps this peer holds the full sum of segment r+1.
  ring_phase(x, n, wire, MessageKind::kReduceScatter, seq);
  const int own = (r + 1) % p;  // keep what the others will receive of our finished segment
  if (wire == Dtype::kBf16) {
    const size_t begin = segment_begin(n, own, p), end = segment_begin(n, own + 1, p);
    for (size_t i = begin; i < end; ++i) x[i] = kernels::from_bf16(kernels::to_bf16(x[i]));
  } else if (wire == Dtype::kInt8) {
    encode_int8(x, n, own, seq, true);
  }
  // All-gather: pass the finished segments around the ring.
  ring_phase(x, n, wire, MessageKind::kAllGather, seq);
}

void RingAllReduce::ring_phase(float* x, size_t n, Dtype wire, MessageKind kind, uint64_t seq) {
  const int p = t_->size(), r = t_->rank();
  auto seg_begin = [&](int i) { return segment_begin(n, i, p); };
  auto seg_len = [&](int i) { return seg_begin(i + 1) - seg_begin(i); };
  auto mod = [&](int i) { return ((i % p) + p) % p; };
  const int next = mod(r + 1), prev = mod(r - 1);
  const bool gather = kind == MessageKind::kAllGather, bf16 = wire == Dtype::kBf16;
  // Everything is sent zero-copy from x (or, bf16, from its rounded copy). In f32, a segment sent
  // in reduce-scatter step s is not written again before all-gather step s overwrites it, and one
  // sent in all-gather is never written again, so waiting for the sends once per phase keeps the
  // sent values consistent; each rounded segment is written once per phase.
  SendGuard guard;
  for (int s = 0; s < p - 1; ++s) {
    const int send_seg = gather ? mod(r + 1 - s) : mod(r - s), recv_seg = gather ? mod(r - s) : mod(r - s - 1);
    const VectorRef ref{kind, seq, static_cast<uint32_t>(s), wire};
    if (wire == Dtype::kInt8) {
      if (!gather) encode_int8(x, n, send_seg, seq, false);
      send_int8(ref, send_seg, n, guard.owner());
      receive_int8(x, n, ref, recv_seg);
      continue;
    }
    const size_t b = seg_begin(send_seg);
    const void* out = x + b;
    if (bf16) {
      kernels::to_bf16(x + b, rounded_.data() + b, seg_len(send_seg));
      out = rounded_.data() + b;
    }
    send_vector(*t_, next, ref, out, guard.owner(), b, seg_len(send_seg), n, 0, chunk_floats_);
    float* dst = x + seg_begin(recv_seg);
    const size_t recv_begin = seg_begin(recv_seg);
    const Received got = receive_vector(*t_, prev, ref, recv_begin, seg_len(recv_seg), n, timeout_s_, [&](const InMessage& m) {
      float* d = dst + (m.header.offset - recv_begin);
      const size_t c = m.count;
      if (!bf16 && gather) std::copy(m.data, m.data + c, d);
      else if (!bf16) for (size_t k = 0; k < c; ++k) d[k] += m.data[k];
      else if (gather) for (size_t k = 0; k < c; ++k) d[k] = kernels::from_bf16(m.bf16()[k]);
      else for (size_t k = 0; k < c; ++k) d[k] += kernels::from_bf16(m.bf16()[k]);
    });
    if (!got.finite)
      throw Error("peer " + std::to_string(r), t_->describe(prev) + " sent NaN or Inf into the global average");
  }
  guard.wait_released(timeout_s_, "peer " + std::to_string(r));
}

void RingAllReduce::encode_int8(float* x, size_t n, int seg, uint64_t seq, bool keep) {
  const int p = t_->size();
  const size_t begin = segment_begin(n, seg, p), end = segment_begin(n, seg + 1, p);
  std::vector<std::vector<uint32_t>>& words = int8_words_[seg];
  words.resize(std::max<size_t>(1, (end - begin + int8_block_ - 1) / int8_block_));  // an empty segment: one chunk
  int8_decoded_.resize(std::min(int8_block_, end - begin));
  size_t pos = begin;
  for (std::vector<uint32_t>& chunk : words) {
    const size_t span = std::min(int8_block_, end - pos);
    const SpanKey key{seq, static_cast<uint32_t>(t_->rank()), pos};
    compress(int8_, key, x + pos, static_cast<uint32_t>(span), &chunk, int8_decoded_.data(), &int8_scratch_);
    if (keep) std::copy(int8_decoded_.begin(), int8_decoded_.begin() + static_cast<std::ptrdiff_t>(span), x + pos);
    pos += span;
  }
}

void RingAllReduce::send_int8(const VectorRef& ref, int seg, size_t n, const Owner& owner) {
  const int p = t_->size(), next = (t_->rank() + 1) % p;
  size_t pos = segment_begin(n, seg, p);
  for (const std::vector<uint32_t>& chunk : int8_words_[seg]) {
    OutMessage m;
    m.header.kind = ref.kind;
    m.header.round = ref.round;
    m.header.tag = ref.tag;
    m.header.total_floats = n;
    m.header.offset = pos;
    m.header.dtype = Dtype::kInt8;
    m.data = chunk.data();
    m.count = chunk.size();
    m.owner = owner;
    t_->send_to_each({next}, m);
    pos += chunk[0];  // its span
  }
}

void RingAllReduce::receive_int8(float* x, size_t n, const VectorRef& ref, int seg) {
  const int p = t_->size(), prev = (t_->rank() + p - 1) % p;
  const size_t begin = segment_begin(n, seg, p), end = segment_begin(n, seg + 1, p);
  const bool gather = ref.kind == MessageKind::kAllGather;
  const std::string me = "peer " + std::to_string(t_->rank());
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  std::vector<std::vector<uint32_t>>& kept = int8_words_[seg];
  size_t pos = begin, chunks = 0;
  do {
    std::optional<InMessage> m = t_->receive({ref.kind, prev, ref.round, ref.tag}, deadline);
    if (!m) throw no_message_from(*t_, ref.kind, prev, ref.round, timeout_s_);
    if (!m->verified && !checksum_matches(m->header, m->data, m->bytes())) {
      log(me, ": dropped a ", kind_name(ref.kind), " chunk claiming to be from ", t_->describe(prev), ": checksum mismatch");
      continue;
    }
    if (m->header.dtype != Dtype::kInt8)
      throw Error(me, t_->describe(prev) + " sends " + kind_name(ref.kind) + " values as " +
                          dtype_name(m->header.dtype) + " but this peer expects int8: the peers' algorithm.wire settings differ");
    const auto* words = reinterpret_cast<const uint32_t*>(m->data);
    std::optional<std::string> problem;
    if (m->header.total_floats != n) throw vector_of_another_length(*t_, prev, ref.kind, m->header.total_floats, n);
    if (m->header.offset != pos)
      problem = "expected a chunk at " + std::to_string(pos) + " of a vector of " + std::to_string(n);
    else
      problem = int8_chunk_.parse(int8_, {ref.round, static_cast<uint32_t>(prev), pos}, words, m->count, n);
    const size_t span = int8_chunk_.span();
    if (!problem && (span > end - pos || (span == 0 && pos < end)))
      problem = "a span of " + std::to_string(span) + " where the segment has " + std::to_string(end - pos) + " left";
    if (problem) {
      log(me, ": dropped a ", kind_name(ref.kind), " chunk claiming to be from ", t_->describe(prev), ": ", *problem);
      continue;
    }
    double sum_squares = 0;
    if (!int8_chunk_.finite(&sum_squares))
      throw Error(me, t_->describe(prev) + " sent NaN or Inf into the global average");
    if (gather) {  // x takes the decoded values (0 + q = q), and the chunk is kept to forward
      std::fill(x + pos, x + pos + span, 0.0f);
      if (chunks == kept.size()) kept.emplace_back();
      kept[chunks++].assign(words, words + m->count);
    }
    int8_chunk_.add_to(1.0f, x + pos);
    pos += span;
  } while (pos < end);
  if (gather) kept.resize(chunks);
}

void RingAllReduce::average(float* x, size_t n, Dtype wire) {
  sum(x, n, wire);
  const float inv = 1.0f / static_cast<float>(t_->size());
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace gossip::peer
