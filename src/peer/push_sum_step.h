// Push-sum / Stochastic Gradient Push (Assran et al. 2019) over a column-stochastic graph.
// Each peer keeps a numerator x and a scalar weight w; the model is the de-biased z = x / w.
// A round pushes (p_j·x, p_j·w) to every out-neighbour j and keeps (p_self·x, p_self·w). Mass
// (Σx, Σw) is conserved exactly: every message is folded in exactly once, late or not.
//
// overlap = false: a round waits for all of its in-neighbours' messages.
// overlap = true:  a round folds whatever has arrived and waits only for messages more than
//                  max_staleness rounds old (bounded staleness); drain() folds the rest.
#pragma once

#include <deque>
#include <vector>

#include "peer/collectives.h"
#include "topology/topology.h"

namespace gossip::peer {

class PushSumStep {
 public:
  PushSumStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s,
              bool overlap, int max_staleness);
  // Starts from model z (x = z, w = 1).
  void init(const float* z);
  // z holds the model after the local update z' = z_prev − η·u; applies the same update to the
  // numerator (x += z' − x/w), mixes, and writes the new de-biased model back into z.
  void step(uint64_t round, float* z);
  // Folds every outstanding message (end of run), then writes x / w into z.
  void drain(float* z);
  // Forgets the messages still expected (a view change abandoned their epoch).
  void drain_discard() { outstanding_.clear(); }
  double weight() const { return w_; }
  std::vector<float>& numerator() { return x_; }
  void set_state(const float* x, double w);

 private:
  struct Expected {
    uint64_t round;
    int sender;
  };
  void fold(const Expected& e);
  void write_model(float* z) const;

  Transport* t_;  // owned by the peer's main, outlives the step
  topology::Graph graph_;
  size_t floats_;
  size_t chunk_floats_;
  double timeout_s_;
  bool overlap_;
  int max_staleness_;
  std::vector<float> x_;
  double w_ = 1.0;
  std::deque<Expected> outstanding_;  // messages addressed to us and not folded yet
  SnapshotPool pool_;
};

}  // namespace gossip::peer
