#include "peer/gossip_step.h"

namespace gossip::peer {

GossipStep::GossipStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats,
                       double timeout_s)
    : t_(&transport), graph_(std::move(graph)), floats_(floats), chunk_floats_(chunk_floats), timeout_s_(timeout_s) {}

void GossipStep::step(uint64_t round, float* x) {
  const topology::Neighbours nb = topology::neighbours(graph_, t_->size(), t_->rank(), static_cast<int64_t>(round));
  const VectorRef ref{MessageKind::kGossip, round, 0};
  if (!nb.out.empty()) {
    auto snapshot = pool_.copy(x, floats_);  // one copy, shared zero-copy by every out-neighbour
    for (const topology::Link& l : nb.out) send_vector(*t_, l.peer, ref, snapshot, 0, floats_, floats_, 0, chunk_floats_);
  }
  const float self = static_cast<float>(nb.self_weight);
  for (size_t i = 0; i < floats_; ++i) x[i] *= self;
  // Fold each neighbour's chunks in as they come: no full copy of a neighbour is kept.
  for (const topology::Link& l : nb.in) {
    const float w = static_cast<float>(l.weight);
    receive_vector(*t_, l.peer, ref, 0, floats_, timeout_s_, [x, w](size_t i, const float* v, size_t c) {
      float* dst = x + i;
      for (size_t k = 0; k < c; ++k) dst[k] += w * v[k];
    });
  }
}

}  // namespace gossip::peer
