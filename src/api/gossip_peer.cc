// gossip-peer: one peer of a decentralized training run, on the library's API (gossip::Peer
// without a buffer trains the YAML's own model). Flags only.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "gossip/peer.h"

namespace {

std::atomic<gossip::Peer*> g_peer{nullptr};  // SIGTERM: leave the run gracefully at the next step
void on_sigterm(int) {
  if (gossip::Peer* p = g_peer.load()) p->leave();
}

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
  flags.add_string("min-step-ms", "tests, benchmarks: every step of this peer takes at least this many ms (asleep)",
                   std::nullopt);
  flags.add_bool("resume", "continue from the newest checkpoint every peer has (checkpoint.dir)");
  flags.add_bool("help", "print this help");
}

// The rank from --rank, else Slurm's or Open MPI's environment, else 0 (the peer checks it
// against the YAML).
int rank_of(const gossip::Flags& flags) {
  if (flags.has("rank")) return static_cast<int>(flags.get_int("rank"));
  if (const char* r = std::getenv("SLURM_PROCID")) return std::atoi(r);
  if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) return std::atoi(r);
  return 0;
}

gossip::PeerOptions peer_options(const gossip::Flags& flags) {
  gossip::PeerOptions o;
  o.config = flags.get_string("config");
  if (flags.has("device")) o.device = flags.get_string("device");
  if (flags.has("epochs")) o.epochs = flags.get_double("epochs");
  if (flags.has("slowdown")) o.slowdown = flags.get_double("slowdown");
  if (flags.has("min-step-ms")) o.min_step_ms = flags.get_double("min-step-ms");
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
    o.rank = rank_of(flags);
  }
  if (flags.has("rendezvous")) o.rendezvous_dir = flags.get_string("rendezvous");
  o.resume = flags.get_bool("resume");
  return o;
}

int run(int argc, char** argv) {
  gossip::Flags flags("gossip-peer");
  add_flags(flags);
  flags.parse(argc, argv);
  if (flags.get_bool("help")) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  if (!flags.positional().empty()) throw gossip::Error("gossip-peer", "unexpected argument '" + flags.positional()[0] + "'");
  gossip::Peer peer(peer_options(flags));
  if (peer.size() > 1) {  // alone, SIGTERM ends the process as usual
    g_peer = &peer;
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, nullptr);
  }
  const gossip::TrainSummary summary = peer.train();
  gossip::log(summary.final_line);
  g_peer = nullptr;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
