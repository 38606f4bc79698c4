// gossip-peer: one peer of a decentralized training run.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "kernels/backend.h"
#include "peer/checkpoint.h"
#include "peer/config.h"
#include "transport/zmq/curve_keys.h"
#include "peer/decentralized_hook.h"
#include "membership/membership.h"
#include "control/metrics_server.h"
#include "transport/rendezvous.h"
#include "peer/trainer.h"
#include "wire/wire_format.h"
#include "transport/zmq/zmq_transport.h"

namespace {

std::atomic<bool> g_leave{false};  // SIGTERM: leave the run gracefully at the next step
void on_sigterm(int) { g_leave = true; }

// Loads the newest checkpoint that every peer of the run has (agreed among them, so they restart
// at the same step) into the trainer.
void resume(const gossip::peer::RunConfig& cfg, int rank, gossip::peer::Trainer& trainer,
            gossip::peer::DecentralizedHook* hook) {
  using namespace gossip::peer;
  const std::string who = "peer " + std::to_string(rank);
  if (cfg.checkpoint_dir.empty()) throw gossip::Error(cfg.file, "--resume needs a 'checkpoint: {dir: ...}' section");
  std::optional<Checkpoint> c = newest_checkpoint(cfg.checkpoint_dir, rank);
  const int64_t mine = c ? c->step : -1;
  int64_t common = mine;
  if (hook) {
    try {
      common = hook->agree_min(mine);
    } catch (const gossip::peer::MembershipInterrupt&) {
      throw gossip::Error(who, "cannot resume: " + hook->membership_problem() +
                                   " while the peers agreed on the checkpoint to resume from; start them again");
    }
  }
  if (common < 0)
    throw gossip::Error(who, std::string("cannot resume: ") + (c ? "another peer has" : "this peer has") +
                                 " no intact checkpoint in " + cfg.checkpoint_dir);
  std::string path = checkpoint_path(cfg.checkpoint_dir, rank, common);
  if (common != mine) {  // another peer is behind: go back to the step it has
    std::string problem;
    c = read_checkpoint(path, &problem);
    if (!c) throw gossip::Error(path, "the peers' newest common checkpoint is step " + std::to_string(common) +
                                          ", but this file is " + problem);
  }
  trainer.restore(*c, path);
}

int run(int argc, char** argv) {
  const auto process_started = std::chrono::steady_clock::now();
  gossip::Flags flags("gossip-peer");
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
  flags.parse(argc, argv);
  if (flags.get_bool("help")) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  if (!flags.positional().empty()) throw gossip::Error("gossip-peer", "unexpected argument '" + flags.positional()[0] + "'");
  gossip::peer::RunConfig cfg = gossip::peer::load_config(flags.get_string("config"));
  if (flags.has("device")) cfg.device = flags.get_string("device");
  if (flags.has("epochs")) cfg.train.epochs = flags.get_double("epochs");
  if (flags.has("slowdown")) {
    cfg.slowdown = flags.get_double("slowdown");
    if (!(cfg.slowdown >= 1 && cfg.slowdown <= 1000)) throw gossip::Error("gossip-peer", "--slowdown must be between 1 and 1000");
  }
  const bool joining = flags.has("join");
  int rank = 0;
  if (joining) {
    if (flags.has("rank") || flags.get_bool("resume"))
      throw gossip::Error("gossip-peer", "--join takes neither --rank nor --resume: the run assigns the joiner its place");
    if (flags.get_string("join").rfind("tcp://", 0) != 0 || flags.get_string("bind").rfind("tcp://", 0) != 0)
      throw gossip::Error("gossip-peer", "--join and --bind need tcp:// endpoints");
  } else if (flags.has("rank")) {
    rank = static_cast<int>(flags.get_int("rank"));
  } else if (const char* r = std::getenv("SLURM_PROCID")) {
    rank = std::atoi(r);
  } else if (const char* r2 = std::getenv("OMPI_COMM_WORLD_RANK")) {
    rank = std::atoi(r2);
  }
  const int n = cfg.peers.count();
  if (rank < 0 || rank >= n)
    throw gossip::Error("gossip-peer", "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(n - 1) +
                                           " (" + cfg.file + " lists " + std::to_string(n) + " peers)");
  gossip::set_log_prefix(joining ? "[joiner] " : "[peer " + std::to_string(rank) + "] ");
  // Peers are the parallelism: several BLAS thread pools on one host would only fight.
  gossip::kernels::set_cpu_threads(cfg.threads > 0 ? cfg.threads : (n > 1 ? 1 : 0));
  using gossip::peer::Algorithm;
  if (n > 1 && cfg.algorithm.kind == Algorithm::kNone) gossip::log("note: ", n, " peers but algorithm none: each trains alone");

  // Destroyed in reverse order: metrics and the hook first; then the transport, whose comm
  // thread may still be sending zero-copy from the model's buffers (on an error path), so the
  // trainer owning those buffers goes after it; the control state, which the comm thread calls,
  // last. The transport is still created first (bind before loading data).
  // The view (which status replies read on the comm thread) goes after the transport too.
  std::unique_ptr<gossip::peer::ControlState> control;
  std::unique_ptr<gossip::peer::Trainer> trainer;
  std::unique_ptr<gossip::peer::ViewTransport> view;
  std::unique_ptr<gossip::peer::ZmqTransport> transport;
  std::unique_ptr<gossip::peer::Membership> membership;
  std::unique_ptr<gossip::peer::DecentralizedHook> hook;
  std::unique_ptr<gossip::peer::MetricsServer> metrics;  // declared last: stopped first
  std::vector<std::string> peer_keys;  // CurveZMQ public keys of the YAML's peers, by rank
  std::string own_public_key;
  if (cfg.algorithm.kind != Algorithm::kNone && n > 1) {
    gossip::peer::tune_allocator_for_large_messages();
    gossip::peer::ZmqTransportOptions opt;
    opt.rank = joining ? -1 : rank;
    if (joining) opt.bind = flags.get_string("bind");
    else for (const auto& p : cfg.peers.list) opt.endpoints.push_back(p.endpoint);
    opt.elastic = true;
    opt.heartbeat_interval_s = cfg.algorithm.heartbeat_s;
    opt.heartbeat_timeout_s = cfg.algorithm.dead_after_s;
    if (flags.has("rendezvous")) opt.rendezvous_dir = flags.get_string("rendezvous");
    opt.run_id = gossip::peer::run_id_from_environment();
    opt.max_chunk_bytes = static_cast<size_t>(cfg.algorithm.chunk_bytes);
    opt.single_copy = cfg.algorithm.single_copy;
    opt.connect_timeout_s = cfg.algorithm.timeout_s;
    opt.max_unverified_connections = static_cast<size_t>(cfg.max_unverified_connections);
    if (!cfg.keys_dir.empty() && joining) {  // CurveZMQ: the members learn our key from the join
      if (!flags.has("key") || !flags.has("join-key"))
        throw gossip::Error("gossip-peer", cfg.file + " uses security: --join also needs --key (ours) and --join-key (the contact's)");
      const gossip::peer::KeyPair own = gossip::peer::read_keypair(flags.get_string("key"));
      opt.curve_public = own_public_key = own.public_key;
      opt.curve_secret = own.secret_key;
      opt.allowed_keys = gossip::peer::read_allowed_keys(cfg.keys_dir);
    } else if (!cfg.keys_dir.empty()) {  // CurveZMQ on every socket, allow-list = every *.pub there
      const gossip::peer::KeyPair own = gossip::peer::read_keypair(gossip::peer_path(cfg.keys_dir, rank, ".key"));
      opt.curve_public = own_public_key = own.public_key;
      opt.curve_secret = own.secret_key;
      for (int j = 0; j < n; ++j)
        peer_keys.push_back(gossip::peer::read_public_key(gossip::peer_path(cfg.keys_dir, j, ".pub")));
      opt.peer_public_keys = peer_keys;
      opt.allowed_keys = gossip::peer::read_allowed_keys(cfg.keys_dir);
    }
    // Bind before loading data, so neighbours can queue messages to us while we start.
    transport = std::make_unique<gossip::peer::ZmqTransport>(opt);
    gossip::log("bound ", transport->bound_endpoint(), ", algorithm ", gossip::peer::algorithm_name(cfg.algorithm.kind),
                ", topology ", gossip::topology::kind_name(cfg.topology.kind), ", ", n, " peers");
  }
  // A joiner asks first and loads its data while the members agree and send the welcome.
  const auto join_started = std::chrono::steady_clock::now();
  if (joining) {
    const std::string contact_key = flags.has("join-key") ? gossip::peer::read_public_key(flags.get_string("join-key")) : "";
    gossip::peer::Membership::request_join(*transport, flags.get_string("join"), contact_key, transport->bound_endpoint(),
                                           own_public_key, gossip::peer::planned_num_params(cfg));
  }
  trainer = std::make_unique<gossip::peer::Trainer>(cfg, joining ? 0 : rank, joining ? 1 : n, nullptr);
  if (joining && trainer->model().num_params() != gossip::peer::planned_num_params(cfg))
    throw gossip::Error(cfg.file, "the data set gives a model of " + std::to_string(trainer->model().num_params()) +
                                      " parameters, not the " + std::to_string(gossip::peer::planned_num_params(cfg)) +
                                      " announced in the join request");
  if (transport) {
    transport->set_max_total_floats(trainer->model().num_params() + 16);
    gossip::peer::View initial;
    for (const auto& p : cfg.peers.list)
      initial.members.push_back({p.id, p.endpoint, p.id < static_cast<int>(peer_keys.size()) ? peer_keys[p.id] : ""});
    initial.next_id = n;
    std::optional<gossip::peer::Welcome> welcome;
    if (joining) {
      const auto deadline = join_started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double>(cfg.algorithm.timeout_s));
      welcome = gossip::peer::Membership::await_welcome(*transport, flags.get_string("join"), deadline, cfg.algorithm.timeout_s);
      initial = welcome->view;
      rank = initial.rank_of(welcome->id);
      gossip::set_log_prefix("[peer " + std::to_string(welcome->id) + "] ");
    }
    view = std::make_unique<gossip::peer::ViewTransport>(*transport, initial, joining ? welcome->id : rank);
    if (joining) view->set_view(initial, welcome->id);
    membership = std::make_unique<gossip::peer::Membership>(*transport, *view, cfg.algorithm.timeout_s,
                                                            trainer->model().num_params());
    if (joining) membership->note_admitted(welcome->admitted);
    hook = std::make_unique<gossip::peer::DecentralizedHook>(cfg, *view, trainer->model().num_params(), membership.get());
    hook->set_leave_flag(&g_leave);
    if (joining) {
      view->suspend_interrupts(true);
      hook->receive_start_model(trainer->model(), initial.rank_of(welcome->contact_id), welcome->round);
      view->suspend_interrupts(false);
      trainer->start_at(welcome->round, welcome->total_steps);
      trainer->reshard(rank, view->size());
      hook->start_at(welcome->round);
      const auto now = std::chrono::steady_clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - join_started).count();
      const double since_start = std::chrono::duration<double, std::milli>(now - process_started).count();
      gossip::log("joined as peer ", welcome->id, " (rank ", rank, " of ", view->size(), ", epoch ", initial.epoch,
                  "), starting at step ", welcome->round, ", ", static_cast<int>(ms), " ms after the join request (",
                  static_cast<int>(since_start), " ms after this peer started)");
    }
    hook->set_total_steps(trainer->total_steps());
    membership->set_total_steps(trainer->total_steps());
    const int id = joining ? welcome->id : rank;
    gossip::peer::ControlInfo info{id, rank, view->size(), trainer->total_steps(), gossip::peer::algorithm_name(cfg.algorithm.kind),
                                   cfg.topology, trainer->model().num_params()};
    control = std::make_unique<gossip::peer::ControlState>(info, view.get());
    control->set_view(id, rank, view->size(), initial.epoch);
    hook->set_control(control.get());
    transport->set_control_handler(control.get());
    trainer->set_hook(hook.get());
    if (cfg.metrics_port >= 0) {
      const int port = cfg.metrics_port == 0 ? 0 : cfg.metrics_port + rank;
      metrics = std::make_unique<gossip::peer::MetricsServer>(cfg.metrics_host, port,
                                                              [c = control.get()] { return c->prometheus_text(); });
      gossip::log("metrics on http://", cfg.metrics_host, ":", metrics->port(), "/metrics");
    }
  }
  if (flags.get_bool("resume")) resume(cfg, rank, *trainer, hook.get());
  if (hook) {
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, nullptr);
  }
  gossip::peer::TrainResult r = trainer->run();
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << "final: peer " << rank << " test_acc " << r.test.accuracy
      << " test_loss " << r.test.loss;
  if (r.averaged) out << " averaged_model_test_acc " << r.averaged->accuracy;
  out << " samples/s " << std::setprecision(0) << r.samples_per_s;
  {  // identifies the final model exactly (reproducibility checks, resume tests)
    const std::vector<float> p = trainer->model().download_params();
    out << " params_crc " << std::hex << gossip::peer::crc32c(p.data(), p.size() * sizeof(float)) << std::dec;
  }
  if (transport) {
    const auto s = transport->stats();
    out << std::setprecision(1) << " sent_MB " << s.bytes_sent / 1e6 << " received_MB " << s.bytes_received / 1e6
        << " wait_s " << s.wait_seconds << " dropped " << s.messages_dropped;
    if (s.bytes_lent) out << " lent_MB " << s.bytes_lent / 1e6;  // of sent_MB: copied by neighbours (single_copy)
    if (s.connections_refused) out << " refused_connections " << s.connections_refused;
  }
  gossip::log(out.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
