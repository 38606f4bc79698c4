// Push-sum / Stochastic Gradient Push (Assran et al. 2019) over a column-stochastic graph.
// Each peer keeps a numerator x and a scalar weight w; the model is the de-biased z = x / w.
// A round pushes (p_j·x, p_j·w) to every out-neighbour j and keeps (p_self·x, p_self·w). Mass
// (Σx, Σw) is conserved exactly: every message is folded in exactly once, late or not.
//
// overlap = false: a round waits for all of its in-neighbours' messages.
// overlap = true:  a round folds whatever has arrived and waits only for messages more than
//                  max_staleness rounds old (bounded staleness); drain() folds the rest.
// overlap = true, max_staleness < 0 (YAML "unbounded"): asynchronous, a round never waits. Each
//                  link numbers its messages (the header's round field carries that number) and
//                  a round folds everything that has arrived on every link, in order, whatever
//                  round its sender is in: a persistent straggler slows only itself. Every peer
//                  runs the same rounds (set_total_rounds), so each knows how many messages a
//                  link carries in all; drain() tells the peers that push to it that it has
//                  finished and folds the rest. Messages to a finished peer carry no mass
//                  (zeros, weight 0): a peer still running keeps its mass instead of pushing it
//                  into finished peers, which would drive its w, and with it the effective step
//                  size η/w and the float numerator, to extremes.
//
// wire = bf16: each share p_j·x travels rounded to bfloat16 (half the bytes) and the sender keeps
// the rounding residual p_j·x − Q(p_j·x) in its own numerator, so Σx is still conserved (to float
// rounding); weights travel exactly (the header's double).
//
// The numerator lives where the model does, and the arithmetic is the Backend's (push_sum_split,
// accumulate, scale_copy): host memory through the CPU backend this step owns; for a model on a
// device, that device's kernels, with each round's shares downloaded once to be sent and each
// received chunk uploaded once into a staging buffer and folded there.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "kernels/backend.h"
#include "topology/topology.h"

namespace gossip::peer {

class PushSumStep {
 public:
  PushSumStep(Transport& transport, topology::Graph graph, size_t floats, size_t chunk_floats, double timeout_s,
              bool overlap, int max_staleness, Dtype wire = Dtype::kF32);
  // Starts from model z (x = z, w = 1). z is in `device`'s memory when one is named that is not a
  // host backend (it must outlive the step; the numerator then lives there too), else host memory.
  // Every z below is in the same memory.
  void init(const float* z, kernels::Backend* device = nullptr);
  // z holds the model after the local update z' = z_prev − η·u; applies the same update to the
  // numerator (x += z' − x/w), mixes, and writes the new de-biased model back into z.
  void step(uint64_t round, float* z);
  // Folds every outstanding message (end of run), then writes x / w into z.
  void drain(float* z);
  // Forgets the messages still expected (a view change abandoned their epoch).
  void drain_discard();
  // Asynchronous mode: the run's length (every peer runs rounds [first step() round, total)).
  void set_total_rounds(uint64_t total) { total_rounds_ = total; }
  double weight() const { return w_; }
  std::vector<float> numerator() const;  // a host copy
  void set_state(const float* host_x, double w);
  // For checkpoints: the numerator, then the weight as the two float halves of the double (exact).
  std::vector<float> save_state() const;
  // The inverse (after init); throws gossip::Error naming `who` for a state of another size.
  void restore_state(const std::vector<float>& state, const std::string& who);
  // Throws that error without restoring anything.
  void check_state(const std::vector<float>& state, const std::string& who) const;
  // overlap with max_staleness < 0: rounds never wait (see above).
  bool asynchronous() const { return overlap_ && max_staleness_ < 0; }

 private:
  struct Expected {
    uint64_t round;
    int sender;
  };
  void fold(const Expected& e);
  void add_chunk(const InMessage& m);
  void write_model(float* z);
  bool on_device() const { return backend_ != host_.get(); }
  // Asynchronous mode: how many messages each peer sends to this one in rounds
  // [first_round_, total_rounds_) (recomputed when n or the first round changes).
  const std::map<int, uint64_t>& link_totals();
  void fold_arrived();
  void send_shares(const topology::Neighbours& nb, uint64_t round, const float* z);

  Transport* t_;  // owned by the peer's Node (or a test), outlives the step
  topology::Graph graph_;
  size_t floats_;
  size_t chunk_floats_;
  double timeout_s_;
  bool overlap_;
  int max_staleness_;
  Dtype wire_;
  std::unique_ptr<kernels::Backend> host_ = kernels::make_cpu_backend();
  kernels::Backend* backend_ = host_.get();  // where the numerator lives: host_, or the model's device
  kernels::DeviceArray<float> x_;            // the numerator
  // On a device: each out-neighbour's share until it comes down, and the received chunks.
  std::vector<kernels::DeviceArray<float>> device_shares_;
  kernels::DeviceArray<float> staging_;
  double w_ = 1.0;
  std::deque<Expected> outstanding_;  // messages addressed to us and not folded yet
  SnapshotPool pool_;
  // Asynchronous mode: messages sent per out-link and folded per in-link since init().
  std::map<int, uint64_t> sent_on_link_, folded_from_;
  uint64_t total_rounds_ = 0, first_round_ = 0;
  bool started_ = false;
  std::map<int, uint64_t> link_totals_;
  std::set<int> finished_;                  // out-neighbours that said they are done
  static constexpr uint32_t kDoneTag = 1;   // tag of that (empty) message
  int totals_for_n_ = -1;
  uint64_t totals_from_ = 0;
};

}  // namespace gossip::peer
