#include "peer/gossip_step.h"

namespace gossip::peer {

GossipStep::GossipStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                       double timeout_s)
    : t_(&transport), graph_(std::move(graph)), floats_(floats), chunk_floats_(chunk_floats), timeout_s_(timeout_s) {}

void GossipStep::step(uint64_t round, const float* in, float* out) {
  const topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  const VectorRef ref{MessageKind::kGossip, round, 0};
  SendGuard guard;
  std::vector<int> out_peers;
  for (const topology::Link& l : nb.out) out_peers.push_back(l.peer);
  send_vector(*t_, out_peers, ref, in, guard.owner(), 0, floats_, floats_, 0, chunk_floats_);
  const float self = static_cast<float>(nb.self_weight);
  if (nb.in.empty()) {
    for (size_t i = 0; i < floats_; ++i) out[i] = self * in[i];
  }
  // Fold each neighbour's chunks in as they come (no full copy of a neighbour is kept); the
  // first neighbour's pass also applies the self weight, so x is read once.
  for (size_t k = 0; k < nb.in.size(); ++k) {
    const float w = static_cast<float>(nb.in[k].weight);
    if (k == 0) {
      receive_vector(*t_, nb.in[k].peer, ref, 0, floats_, timeout_s_, [in, out, w, self](size_t i, const float* v, size_t c) {
        const float* __restrict src = in + i;
        float* __restrict dst = out + i;
        for (size_t j = 0; j < c; ++j) dst[j] = self * src[j] + w * v[j];
      });
    } else {
      receive_vector(*t_, nb.in[k].peer, ref, 0, floats_, timeout_s_, [out, w](size_t i, const float* v, size_t c) {
        float* __restrict dst = out + i;
        for (size_t j = 0; j < c; ++j) dst[j] += w * v[j];
      });
    }
  }
  guard.wait_released(timeout_s_, "peer " + std::to_string(t_->rank()));
}

}  // namespace gossip::peer
