#include "gossip/peer.h"

#include <atomic>
#include <cstdlib>

#include "common/error.h"
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
  return o;
}

uint32_t params_crc(std::span<const float> params) { return peer::crc32c(params.data(), params.size_bytes()); }

struct Peer::State {
  std::atomic<bool> leave{false};
  size_t floats = 0;
  std::unique_ptr<peer::Node> node;  // last: destroyed first, while `leave` is still there
};

Peer::Peer(const PeerOptions& options, std::span<float> params) : state_(std::make_unique<State>()) {
  if (params.empty()) throw Error("gossip::Peer", "the parameter buffer is empty");
  peer::NodeOptions o;
  o.config = peer::load_config(options.config);
  if (options.join) {
    o.join = options.join;
    o.bind = options.bind;
    o.key_file = options.key_file;
    o.join_key_file = options.join_key_file;
  } else {
    if (options.rank < 0 || options.rank >= o.config.peers.count())
      throw Error(options.config, "rank " + std::to_string(options.rank) + " is not one of the " +
                                      std::to_string(o.config.peers.count()) + " peers");
    o.rank = options.rank;
  }
  o.rendezvous_dir = options.rendezvous_dir;
  o.leave_flag = &state_->leave;
  o.external = params;
  o.external_steps = options.steps > 0 ? options.steps : o.config.train.steps;
  state_->floats = params.size();
  state_->node = std::make_unique<peer::Node>(std::move(o));
}

Peer::~Peer() = default;

peer::Node& Peer::node() const {
  if (!state_->node) throw Error("gossip::Peer", "the peer was closed");
  return *state_->node;
}

bool Peer::mix(int64_t step, std::span<float> params) { return node().mix(step, params); }
bool Peer::average(std::span<float> params) { return node().average(params); }

ConsensusDistance Peer::consensus(std::span<const float> params) {
  const peer::Consensus c = node().consensus(params);
  return {c.distance, c.mean_norm2};
}

void Peer::leave() { state_->leave = true; }
void Peer::close() { state_->node.reset(); }
int Peer::rank() const { return node().rank(); }
int Peer::size() const { return node().size(); }
uint32_t Peer::epoch() const { return node().epoch(); }
int64_t Peer::start_step() const { return node().start_step(); }
size_t Peer::num_params() const { return state_->floats; }

}  // namespace gossip
