// gossip-peer: one peer of a decentralized training run. Flags only; the peer is a Node.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "peer/node.h"

namespace {

std::atomic<bool> g_leave{false};  // SIGTERM: leave the run gracefully at the next step
void on_sigterm(int) { g_leave = true; }

void add_flags(gossip::Flags& flags) {
  flags.add_string("config", "topology/run YAML (see configs/)");
  flags.add_string("rank", "this peer's rank; else SLURM_PROCID / OMPI_COMM_WORLD_RANK / 0", std::nullopt);
  flags.add_string("device", "override the YAML's device: auto, cpu or cuda", std::nullopt);
  flags.add_string("epochs", "override optimizer.epochs", std::nullopt);
  flags.add_string("rendezvous", "directory where peers bound to port 0 publish their endpoints", std::nullopt);
  flags.add_string("join", "join a running run through this live peer's endpoint (tcp://HOST:PORT)", std::nullopt);
  flags.add_string("bind", "with --join: this peer's own endpoint", "tcp://127.0.0.1:0");
  flags.add_string("key", "with --join and security: this peer's key pair (made by gossip-keygen; its .pub allowed)", std::nullopt);
  flags.add_string("join-key", "with --join and security: the contact's public key file", std::nullopt);
  flags.add_string("slowdown", "benchmarks: make every step of this peer take this many times longer", std::nullopt);
  flags.add_bool("resume", "continue from the newest checkpoint every peer has (checkpoint.dir)");
  flags.add_bool("help", "print this help");
}

// The rank from --rank, else Slurm's or Open MPI's environment, else 0 (checked against the YAML).
int rank_of(const gossip::Flags& flags, const gossip::peer::RunConfig& cfg) {
  int rank = 0;
  if (flags.has("rank")) rank = static_cast<int>(flags.get_int("rank"));
  else if (const char* r = std::getenv("SLURM_PROCID")) rank = std::atoi(r);
  else if (const char* r2 = std::getenv("OMPI_COMM_WORLD_RANK")) rank = std::atoi(r2);
  const int n = cfg.peers.count();
  if (rank < 0 || rank >= n)
    throw gossip::Error("gossip-peer", "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(n - 1) +
                                           " (" + cfg.file + " lists " + std::to_string(n) + " peers)");
  return rank;
}

gossip::peer::NodeOptions node_options(const gossip::Flags& flags) {
  gossip::peer::NodeOptions o;
  gossip::peer::RunConfig& cfg = o.config;
  cfg = gossip::peer::load_config(flags.get_string("config"));
  if (flags.has("device")) {
    const std::optional<gossip::kernels::Device> device = gossip::kernels::parse_device(flags.get_string("device"));
    if (!device) throw gossip::Error("gossip-peer", "--device must be auto, cpu or cuda, not '" + flags.get_string("device") + "'");
    cfg.device = *device;
  }
  if (flags.has("epochs")) cfg.train.epochs = flags.get_double("epochs");
  if (flags.has("slowdown")) {
    cfg.slowdown = flags.get_double("slowdown");
    if (!(cfg.slowdown >= 1 && cfg.slowdown <= 1000)) throw gossip::Error("gossip-peer", "--slowdown must be between 1 and 1000");
  }
  if (flags.has("join")) {
    if (flags.has("rank") || flags.get_bool("resume"))
      throw gossip::Error("gossip-peer", "--join takes neither --rank nor --resume: the run assigns the joiner its place");
    if (flags.get_string("join").rfind("tcp://", 0) != 0 || flags.get_string("bind").rfind("tcp://", 0) != 0)
      throw gossip::Error("gossip-peer", "--join and --bind need tcp:// endpoints");
    o.join = flags.get_string("join");
    o.bind = flags.get_string("bind");
    if (flags.has("key")) o.key_file = flags.get_string("key");
    if (flags.has("join-key")) o.join_key_file = flags.get_string("join-key");
  } else {
    o.rank = rank_of(flags, cfg);
  }
  if (flags.has("rendezvous")) o.rendezvous_dir = flags.get_string("rendezvous");
  o.resume = flags.get_bool("resume");
  o.leave_flag = &g_leave;
  return o;
}

int run(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();
  gossip::Flags flags("gossip-peer");
  add_flags(flags);
  flags.parse(argc, argv);
  if (flags.get_bool("help")) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  if (!flags.positional().empty()) throw gossip::Error("gossip-peer", "unexpected argument '" + flags.positional()[0] + "'");
  gossip::peer::NodeOptions options = node_options(flags);
  options.started = started;
  gossip::peer::Node node(std::move(options));
  if (node.communicates()) {
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, nullptr);
  }
  const gossip::peer::TrainResult r = node.train();
  gossip::log(node.final_line(r));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
