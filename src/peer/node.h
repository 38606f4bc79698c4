// One peer of a run, wired from its config: the composition root, behind the library's
// gossip::Peer (include/gossip/peer.h), which gossip-peer and the Python module use: the model is
// the YAML's own (trained by train()) or the caller's parameter buffer (mixed by mix()). The
// constructor binds, asks to join (when joining), loads the data, takes part in the join and
// resumes from a checkpoint; train() runs the loop, or the library caller trains and calls mix().
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "control/control.h"
#include "control/metrics_server.h"
#include "membership/membership.h"
#include "peer/config.h"
#include "peer/decentralized_hook.h"
#include "peer/host_buffer_model.h"
#include "peer/live_ticker.h"
#include "peer/trainer.h"
#include "transport/zmq/zmq_transport.h"

namespace gossip::peer {

struct NodeOptions {
  RunConfig config;
  int rank = 0;                       // the YAML's rank (ignored when joining)
  std::optional<std::string> join;    // join a running run through this live member's endpoint
  std::string bind = "tcp://127.0.0.1:0";  // a joiner's own endpoint
  std::string key_file;               // a joiner under CurveZMQ: its key pair
  std::string join_key_file;          // ... and its contact's public key
  std::string rendezvous_dir;         // where port-0 peers publish their endpoints
  bool resume = false;                // continue from the newest checkpoint every peer has
  const std::atomic<bool>* leave_flag = nullptr;  // set: leave the run gracefully at the next step
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();  // for the join log
  // A library peer: the model is this buffer of the caller's, trained by the caller (no data, no
  // trainer) for `external_steps` steps (the run's length: the schedule a joiner is told). A joiner
  // receives the run's model into it.
  std::optional<std::span<float>> external;
  int64_t external_steps = 0;
};

class Node {
 public:
  explicit Node(NodeOptions options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  TrainResult train();
  // A library peer, after its caller's step `step` on the buffer (rebound to `params`, the same
  // size): the algorithm's exchange for that step, which must be next_step(). False once this
  // peer has left the run.
  bool mix(int64_t step, std::span<float> params);
  // A library peer at the end: the exact average of every peer's buffer into `params` (false when
  // it left the run or has no others).
  bool average(std::span<float> params);
  // A library peer's training figures for the control channel's status.
  void report(double loss, double train_accuracy, double samples_per_s);
  // Collective (every peer at the same point): Ξ of the buffers.
  Consensus consensus(std::span<const float> params);
  int rank() const;  // in the current membership
  int size() const;
  // The member's id, which a view change keeps: the YAML's rank, a joiner's from its welcome.
  int id() const;
  size_t num_params() { return model().num_params(); }
  uint32_t epoch() const;
  // Whether a library peer's mix(step) writes a checkpoint (the YAML's checkpoint.every; the
  // caller may save its own state, e.g. its optimiser's, for the same step).
  bool checkpoint_due(int64_t step) const;
  // The first step this peer trains: 0, for a joiner the round its welcome named, after a resume
  // the checkpoint's step.
  int64_t start_step() const { return start_step_; }
  // The step a library peer's next mix() is for: start_step(), then one more after each mix(), or
  // the run's step when the run took this peer back after cutting it off (its buffer then holds
  // the contact's model, as a joiner's does).
  int64_t next_step() const { return next_step_.value_or(start_step_); }
  // The run's length in steps (a joiner's from its welcome).
  int64_t total_steps() const;
  // "final: peer ID test_acc ... params_crc ... sent_MB ...": the line gossip-launch reads.
  std::string final_line(const TrainResult& r) const;
  // Whether this peer takes part in a run with others (false: it trains alone).
  bool communicates() const { return transport_ != nullptr; }

 private:
  void open_transport();
  void lower_trainer_priority();
  void request_join();
  void start_membership();
  void take_joiner_place(const Welcome& welcome, const View& initial);
  void start_control(int id, uint32_t epoch);
  void resume();
  void save_external_checkpoint(int64_t steps_done);
  model::Model& model();
  bool exchange(int64_t step);  // mix()'s rounds on the rebound buffer

  NodeOptions options_;
  const RunConfig& cfg_;
  int rank_;
  int n_;
  std::vector<std::string> peer_keys_;  // CurveZMQ public keys of the YAML's peers, by rank
  std::string own_public_key_;
  std::chrono::steady_clock::time_point join_started_{};
  int64_t start_step_ = 0;
  std::optional<int64_t> next_step_;  // a library peer's, once it has mixed
  // Destroyed in reverse order: metrics and the hook first; then the transport, whose comm
  // thread may still be sending zero-copy from the model's buffers (on an error path), so the
  // trainer owning those buffers goes after it; the control state, which the comm thread calls,
  // last. The transport is still created first (bind before loading data). The view (which
  // status replies read on the comm thread) goes after the transport too.
  std::unique_ptr<ControlState> control_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<HostBufferModel> external_;  // a library peer's model instead of the trainer's
  LiveTicker live_;  // a library peer's live lines (gossip-peer's come from its trainer)
  std::unique_ptr<ViewTransport> view_;
  std::unique_ptr<ZmqTransport> transport_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<DecentralizedHook> hook_;
  std::unique_ptr<MetricsServer> metrics_;  // declared last: stopped first
};

}  // namespace gossip::peer
