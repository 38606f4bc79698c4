// gossip as a library: one peer of a decentralized run whose model is the caller's own float
// buffer. The caller trains the model; after each local step it calls mix(), which runs the
// run's algorithm from the YAML (gossip with its topology, push-sum with its weight and
// de-biasing kept inside, the exact global average on the Gossip-PGA / local-SGD schedule,
// all-reduce). Membership (joins, leaves, crashes), CurveZMQ security and the control channel
// (gossip-consensus) work as for gossip-peer, which is this API too: a Peer made without a
// buffer trains the YAML's own model (model:, data:) with train().
//
//   gossip::PeerOptions o = gossip::PeerOptions::from_environment();  // set by gossip-launch -- CMD
//   gossip::Peer peer(o, params);                  // params: std::span<float>, the whole model
//   for (int64_t step = peer.start_step(); step < peer.total_steps(); step = peer.next_step()) {
//     train_one_step(params);                      // the caller's optimiser updates params
//     if (!peer.mix(step, params)) break;          // false: this peer left the run
//   }
//   peer.average(params);                          // every peer ends with the exact average
//   peer.close();
//
// Errors are gossip::Error (a std::runtime_error) naming the file, field or peer at fault.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace gossip {

namespace peer {
class Node;
}

struct PeerOptions {
  std::string config;                 // the run's YAML
  int rank = -1;                      // this peer's rank in the YAML (unused when joining)
  std::optional<std::string> join;    // instead: join the running run through this member's endpoint
  std::string bind = "tcp://127.0.0.1:0";  // a joiner's own endpoint
  std::string key_file, join_key_file;     // a joiner under CurveZMQ: its key pair, the contact's key
  std::string rendezvous_dir;         // where peers bound to port 0 publish their endpoints
  int64_t steps = 0;                  // the run's length in steps (0: the YAML's optimizer steps)
  // Continue from the newest checkpoint every peer has in the YAML's checkpoint.dir: the buffer
  // gets its model, start_step() its step (not with `join`).
  bool resume = false;
  // Overrides of the YAML for a peer that trains its own model (gossip-peer's flags):
  std::string device;                 // "auto", "cpu" or "cuda" ("": the YAML's `device`)
  std::optional<double> epochs;       // optimizer.epochs
  double slowdown = 1;                // benchmarks: every step takes this many times longer (1..1000)
  // Tests and benchmarks: every step takes at least this long, the rest asleep (0..60000 ms). Unlike
  // `slowdown`, which multiplies the step's measured time (so a sanitizer build or a busy machine
  // stretches it further), a run of S steps then lasts about S × min_step_ms on any build.
  double min_step_ms = 0;

  // GOSSIP_CONFIG, GOSSIP_RANK, GOSSIP_RENDEZVOUS and GOSSIP_RESUME, as gossip-launch
  // [--resume] CONFIG -- CMD sets them.
  static PeerOptions from_environment();
};

struct ConsensusDistance {
  double distance = 0;    // Ξ = (1/n)·Σ‖x_i − x̄‖²
  double mean_norm2 = 0;  // ‖x̄‖²
};

// The checksum gossip-peer's final line prints as params_crc (CRC-32C of the floats' bytes):
// gossip-launch reads it to tell whether the run ended with one model.
uint32_t params_crc(std::span<const float> params);

// What train() reports at the end.
struct TrainSummary {
  double test_accuracy = 0, test_loss = 0;  // this peer's own model on the test (validation) set
  std::optional<double> averaged_test_accuracy, averaged_test_loss;  // the average of all peers' models
  // "final: peer R test_acc ... params_crc ... sent_MB ...": the line gossip-launch reads.
  std::string final_line;
};

class Peer {
 public:
  // Binds, meets the other peers (a joiner: is admitted and receives the run's model into
  // `params`). `params` must stay valid until the peer is destroyed or mix() rebinds it.
  Peer(const PeerOptions& options, std::span<float> params);
  // A peer that trains the YAML's own model on its data (what gossip-peer runs): see train().
  explicit Peer(const PeerOptions& options);
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Trains the YAML's model to the end of the run (a peer made without a buffer), mixing after
  // every step; at the end every peer holds the exact average, when the algorithm has one.
  TrainSummary train();
  // The exchange for step `step` on `params` (the same size as at construction), in place.
  // `step` must be next_step(): one call per step, in order (an error names any other).
  // False once this peer has left the run (leave()); then the caller stops.
  bool mix(int64_t step, std::span<float> params);
  // Every peer at the end: `params` becomes the exact average of all peers' buffers (push-sum:
  // after draining its weights). False when this peer left or trains alone.
  bool average(std::span<float> params);
  // Collective: every peer calls it at the same point.
  ConsensusDistance consensus(std::span<const float> params);
  // The caller's training figures for the control channel (gossip-consensus --status, the
  // Prometheus metrics), with the norm of the buffer last given to mix().
  void report(double loss, double train_accuracy = 0, double samples_per_s = 0);
  // Whether mix(step) writes a checkpoint (the YAML's `checkpoint: {dir, every}`: the buffer and
  // the algorithm's state, e.g. push-sum's weight, as of step + 1 steps done). The caller's own
  // state (its optimiser's moments) is not in it: save it for the same step if you need it.
  bool checkpoint_due(int64_t step) const;
  // Graceful leave: announced at the next step (mix() then returns false; train() stops). Only
  // stores an atomic flag: safe from another thread or a signal handler.
  void leave();
  // Closes the sockets (after average(): the others no longer expect this peer). Any later call
  // but num_params() is an error.
  void close();

  int rank() const;
  int size() const;             // peers in the current view
  uint32_t epoch() const;       // membership epoch: changes with every join, leave or crash
  int64_t start_step() const;   // the first step to train: 0, a joiner's step in the run, a checkpoint's
  // The step to train next: start_step(), then one more after each mix(). A peer that stalled
  // long enough for the others to cut it off is taken back by the run within its mix(): its buffer
  // then holds its contact's model and next_step() jumps to the run's step (reset the optimiser's
  // state there, as a joiner starts without any).
  int64_t next_step() const;
  int64_t total_steps() const;  // the run's length: PeerOptions::steps, the YAML's, or a joiner's welcome's
  size_t num_params() const;

 private:
  peer::Node& node() const;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gossip
