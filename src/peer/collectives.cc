#include "peer/collectives.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace gossip::peer {

std::shared_ptr<const std::vector<float>> SnapshotPool::copy(const float* x, size_t n, float scale) {
  std::shared_ptr<std::vector<float>> buf;
  for (auto& b : buffers_)
    if (b.use_count() == 1) {  // only the pool holds it: the transport is done with it
      buf = b;
      break;
    }
  if (!buf) {
    buf = std::make_shared<std::vector<float>>();
    buffers_.push_back(buf);
  }
  buf->resize(n);
  if (scale == 1.0f) {
    if (n) std::memcpy(buf->data(), x, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) (*buf)[i] = scale * x[i];
  }
  return buf;
}

void send_vector(Transport& t, int peer, const VectorRef& ref, std::shared_ptr<const std::vector<float>> data,
                 size_t offset, size_t count, size_t total, double weight, size_t chunk_floats) {
  size_t done = 0;
  do {
    const size_t c = std::min(chunk_floats, count - done);
    OutMessage m;
    m.header.kind = static_cast<uint16_t>(ref.kind);
    m.header.round = ref.round;
    m.header.tag = ref.tag;
    m.header.total_floats = total;
    m.header.offset = offset + done;
    m.header.weight = weight;
    m.data = data->data() + done;
    m.count = c;
    m.owner = data;
    t.send(peer, std::move(m));
    done += c;
  } while (done < count);
}

double receive_vector(Transport& t, int peer, const VectorRef& ref, size_t offset, size_t count, double timeout_s,
                      const std::function<void(size_t, const float*, size_t)>& fold) {
  const MatchKey key{ref.kind, peer, ref.round, ref.tag};
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  size_t got = 0;
  double weight = 0;
  do {
    std::optional<InMessage> m = t.receive(key, deadline);
    if (!m)
      throw Error("peer " + std::to_string(t.rank()),
                  "no " + kind_name(static_cast<uint16_t>(ref.kind)) + " message from " + t.describe(peer) +
                      " for round " + std::to_string(ref.round) + " within " + std::to_string(timeout_s) +
                      " s: the neighbour is dead, hung or far behind");
    const uint64_t begin = m->header.offset;
    if (begin < offset + got || begin + m->count > offset + count)
      throw Error("peer " + std::to_string(t.rank()), "chunk [" + std::to_string(begin) + ", +" + std::to_string(m->count) +
                                                          ") from " + t.describe(peer) + " is outside the expected range");
    if (got == 0) weight = m->header.weight;
    fold(begin - offset, m->data, m->count);
    got += m->count;
  } while (got < count);
  return weight;
}

void RingAllReduce::sum(float* x, size_t n) {
  const int p = t_->size(), r = t_->rank();
  const uint64_t seq = sequence_++;
  if (p == 1) return;
  auto seg_begin = [&](int i) { return n * static_cast<size_t>(i) / p; };
  auto seg_len = [&](int i) { return seg_begin(i + 1) - seg_begin(i); };
  auto mod = [&](int i) { return ((i % p) + p) % p; };
  const int next = mod(r + 1), prev = mod(r - 1);
  // Reduce-scatter: after p−1 steps this peer holds the full sum of segment r+1.
  for (int s = 0; s < p - 1; ++s) {
    const int send_seg = mod(r - s), recv_seg = mod(r - s - 1);
    const VectorRef ref{MessageKind::kReduceScatter, seq, static_cast<uint32_t>(s)};
    send_vector(*t_, next, ref, pool_.copy(x + seg_begin(send_seg), seg_len(send_seg)), seg_begin(send_seg),
                seg_len(send_seg), n, 0, chunk_floats_);
    float* dst = x + seg_begin(recv_seg);
    receive_vector(*t_, prev, ref, seg_begin(recv_seg), seg_len(recv_seg), timeout_s_,
                   [dst](size_t i, const float* v, size_t c) {
                     for (size_t k = 0; k < c; ++k) dst[i + k] += v[k];
                   });
  }
  // All-gather: pass the finished segments around the ring.
  for (int s = 0; s < p - 1; ++s) {
    const int send_seg = mod(r + 1 - s), recv_seg = mod(r - s);
    const VectorRef ref{MessageKind::kAllGather, seq, static_cast<uint32_t>(s)};
    send_vector(*t_, next, ref, pool_.copy(x + seg_begin(send_seg), seg_len(send_seg)), seg_begin(send_seg),
                seg_len(send_seg), n, 0, chunk_floats_);
    float* dst = x + seg_begin(recv_seg);
    receive_vector(*t_, prev, ref, seg_begin(recv_seg), seg_len(recv_seg), timeout_s_,
                   [dst](size_t i, const float* v, size_t c) { std::memcpy(dst + i, v, c * sizeof(float)); });
  }
}

void RingAllReduce::average(float* x, size_t n) {
  sum(x, n);
  const float inv = 1.0f / static_cast<float>(t_->size());
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace gossip::peer
