#include "gossip/peer.h"

#include <atomic>
#include <cstdlib>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "peer/config.h"
#include "peer/node.h"
#include "wire/wire_format.h"

namespace gossip {

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

PeerOptions PeerOptions::from_environment() {
  PeerOptions o;
  o.config = env_or_empty("GOSSIP_CONFIG");
  if (o.config.empty()) throw Error("gossip::Peer", "GOSSIP_CONFIG is not set (start the command with gossip-launch CONFIG -- CMD)");
  const std::string rank = env_or_empty("GOSSIP_RANK");
  char* end = nullptr;
  const long r = std::strtol(rank.c_str(), &end, 10);
  if (rank.empty() || *end || r < 0 || r > 1 << 20) throw Error("gossip::Peer", "GOSSIP_RANK '" + rank + "' is not a rank");
  o.rank = static_cast<int>(r);
  o.rendezvous_dir = env_or_empty("GOSSIP_RENDEZVOUS");
  o.resume = env_or_empty("GOSSIP_RESUME") == "1";
  return o;
}

uint32_t params_crc(std::span<const float> params) { return peer::crc32c(params.data(), params.size_bytes()); }

struct Peer::State {
  std::atomic<bool> leave{false};
  size_t floats = 0;
  std::unique_ptr<peer::Node> node;  // last: destroyed first, while `leave` is still there
};

namespace {

// The YAML with the options' overrides, and where this peer stands in the run.
peer::NodeOptions node_options(const PeerOptions& options, const std::atomic<bool>* leave) {
  peer::NodeOptions o;
  o.config = peer::load_config(options.config);
  peer::RunConfig& cfg = o.config;
  peer::apply_overrides(cfg, {options.device, options.epochs, options.slowdown, options.min_step_ms}, "gossip::Peer");
  if (options.join) {
    if (options.resume) throw Error("gossip::Peer", "a joiner does not resume: the run gives it its model and step");
    for (const auto& [what, endpoint] : {std::pair{"join", *options.join}, std::pair{"bind", options.bind}})
      if (std::optional<std::string> why = peer_endpoint_problem(endpoint))
        throw Error("gossip::Peer", std::string(what) + " endpoint '" + escape_for_log(endpoint) + "' " + *why);
    o.join = options.join;
    o.bind = options.bind;
    o.key_file = options.key_file;
    o.join_key_file = options.join_key_file;
  } else {
    const int n = cfg.peers.count();
    if (options.rank < 0 || options.rank >= n)
      throw Error(options.config, "rank " + std::to_string(options.rank) + " is outside 0.." + std::to_string(n - 1) +
                                      " (" + cfg.file + " lists " + std::to_string(n) + " peers)");
    o.rank = options.rank;
  }
  o.rendezvous_dir = options.rendezvous_dir;
  o.resume = options.resume;
  o.leave_flag = leave;
  return o;
}

}  // namespace

Peer::Peer(const PeerOptions& options, std::span<float> params) : state_(std::make_unique<State>()) {
  if (params.empty()) throw Error("gossip::Peer", "the parameter buffer is empty");
  if (options.steps < 0 || options.steps > 1000000000000)  // optimizer.steps' own range
    throw Error("gossip::Peer", "steps must be between 0 (the YAML's) and 1e12, not " + std::to_string(options.steps));
  peer::NodeOptions o = node_options(options, &state_->leave);
  o.external = params;
  o.external_steps = options.steps > 0 ? options.steps : o.config.train.steps;
  state_->floats = params.size();
  state_->node = std::make_unique<peer::Node>(std::move(o));
}

Peer::Peer(const PeerOptions& options) : state_(std::make_unique<State>()) {
  state_->node = std::make_unique<peer::Node>(node_options(options, &state_->leave));
  state_->floats = state_->node->num_params();
}

Peer::~Peer() = default;

peer::Node& Peer::node() const {
  if (!state_->node) throw Error("gossip::Peer", "the peer was closed");
  return *state_->node;
}

TrainSummary Peer::train() {
  const peer::TrainResult r = node().train();
  TrainSummary out;
  out.test_accuracy = r.test.accuracy;
  out.test_loss = r.test.loss;
  if (r.averaged) {
    out.averaged_test_accuracy = r.averaged->accuracy;
    out.averaged_test_loss = r.averaged->loss;
  }
  out.final_line = node().final_line(r);
  return out;
}

bool Peer::mix(int64_t step, std::span<float> params) { return node().mix(step, params); }
bool Peer::average(std::span<float> params) { return node().average(params); }

ConsensusDistance Peer::consensus(std::span<const float> params) {
  const peer::Consensus c = node().consensus(params);
  return {c.distance, c.mean_norm2};
}

void Peer::report(double loss, double train_accuracy, double samples_per_s) {
  node().report(loss, train_accuracy, samples_per_s);
}
bool Peer::checkpoint_due(int64_t step) const { return node().checkpoint_due(step); }
void Peer::leave() { state_->leave = true; }
void Peer::close() { state_->node.reset(); }
int Peer::rank() const { return node().rank(); }
int Peer::size() const { return node().size(); }
uint32_t Peer::epoch() const { return node().epoch(); }
int64_t Peer::start_step() const { return node().start_step(); }
int64_t Peer::next_step() const { return node().next_step(); }
int64_t Peer::total_steps() const { return node().total_steps(); }
size_t Peer::num_params() const { return state_->floats; }

}  // namespace gossip
