#include "peer/node.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/backend.h"
#include "peer/checkpoint.h"
#include "transport/rendezvous.h"
#include "transport/zmq/curve_keys.h"
#include "wire/wire_format.h"

namespace gossip::peer {

Node::Node(NodeOptions options) : options_(std::move(options)), cfg_(options_.config), rank_(options_.rank),
                                  n_(cfg_.peers.count()) {
  const bool joining = options_.join.has_value();
  set_log_prefix(joining ? "[joiner] " : "[peer " + std::to_string(rank_) + "] ");
  // Peers are the parallelism: several BLAS thread pools on one host would only fight.
  kernels::set_cpu_threads(cfg_.threads > 0 ? cfg_.threads : (n_ > 1 ? 1 : 0));
  if (n_ > 1 && cfg_.algorithm.kind == Algorithm::kNone) log("note: ", n_, " peers but algorithm none: each trains alone");
  if (!cfg_.checkpoint_dir.empty()) prepare_checkpoint_dir(cfg_.checkpoint_dir);
  if (cfg_.algorithm.kind != Algorithm::kNone && n_ > 1) open_transport();
  // A library peer's caller steps its optimiser before mix(): no hook sees the gradient first.
  if (options_.external && cfg_.algorithm.gradient_tracking)
    throw Error(cfg_.file, "field 'algorithm.gradient_tracking': not for a library peer (mix() comes after the "
                           "caller's optimiser step; tracking replaces the gradient before it)");
  if (options_.external && cfg_.train.optimizer.quasi_global)
    throw Error(cfg_.file, "field 'optimizer.quasi_global_momentum': not for a library peer (the caller's own "
                           "optimiser steps; gossip's optimiser settings do not reach it)");
  if (joining) request_join();  // then load the data while the members agree and send the welcome
  if (options_.external) {
    external_ = std::make_unique<HostBufferModel>(*options_.external);
  } else {
    trainer_ = std::make_unique<Trainer>(cfg_, joining ? 0 : rank_, joining ? 1 : n_, nullptr);
    if (joining && trainer_->model().num_params() != planned_num_params(cfg_))
      throw Error(cfg_.file, "the data set gives a model of " + std::to_string(trainer_->model().num_params()) +
                                 " parameters, not the " + std::to_string(planned_num_params(cfg_)) +
                                 " announced in the join request");
  }
  if (transport_) start_membership();
  if (options_.resume) resume();
}

Node::~Node() = default;

model::Model& Node::model() { return trainer_ ? trainer_->model() : *external_; }
int64_t Node::total_steps() const { return trainer_ ? trainer_->total_steps() : options_.external_steps; }

TrainResult Node::train() {
  if (!trainer_) throw Error("gossip::Peer", "a library peer is trained by its caller");
  lower_trainer_priority();
  return trainer_->run();
}

// With more training threads than CPUs, a peer's communication thread waits behind the others'
// training for its turn, and heartbeats, probe answers and exchange chunks leave late: on 2 CPUs
// with 64 peers a kill -9 was suspected 2.9–3.7 s after it with dead_after_s 3 (2.9–3.1 s with
// the training threads at nice 10; bench/membership_scale.sh, docs/membership.md). Only this
// thread is lowered (the communication and ZeroMQ threads exist already and keep their level).
void Node::lower_trainer_priority() {
  if (!transport_) return;
  cpu_set_t cpus;
  const int cpu_count = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const int nice = trainer_nice(cfg_, options_.join ? options_.bind : cfg_.peers.list.at(rank_).endpoint,
                                options_.join.has_value(), cpu_count);
  if (nice == 0) return;
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), std::min(19, now + nice)) != 0)
    log("note: could not lower the training thread's priority (", std::strerror(errno), ")");
}

bool Node::mix(int64_t step, std::span<float> params) {
  if (!external_) throw Error("gossip-peer", "mix() is for a library peer");
  if (step != next_step())
    throw Error("gossip::Peer", "mix(step " + std::to_string(step) + ") out of order: this peer's next step is " +
                                    std::to_string(next_step()) +
                                    " (one mix per step, in order from start_step; after the run takes back a "
                                    "peer it had cut off, that peer continues at the run's step: loop on next_step)");
  external_->rebind(params);
  const bool in_run = exchange(step);
  int64_t next = step + 1;
  if (hook_) hook_->rejoined(&next);  // taken back after a cut-off: the run's step
  next_step_ = next;
  return in_run;
}

bool Node::exchange(int64_t step) {
  if (!hook_) {  // alone: nothing to exchange
    if (checkpoint_due(step)) save_external_checkpoint(step + 1);
    return true;
  }
  if (hook_->stop_requested()) return false;
  hook_->before_step(step, *external_);
  hook_->after_step(step, *external_);
  // Where gossip-peer prints a progress line, its peers measure Ξ together (a collective): a
  // library peer takes part at the same steps, so C++ and Python peers can share a run.
  if (!hook_->stop_requested() && ((step + 1) % cfg_.log_every == 0 || step + 1 == total_steps()))
    log("step ", step + 1, "/", total_steps(), hook_->log_extra(step, *external_));
  else if (live_.due())
    log("live step ", step + 1, "/", total_steps(), hook_->live_extra());
  if (hook_->stop_requested()) return false;
  if (checkpoint_due(step)) save_external_checkpoint(step + 1);
  return true;
}

bool Node::checkpoint_due(int64_t step) const {
  return cfg_.checkpoint_every > 0 && (step + 1) % cfg_.checkpoint_every == 0 && step + 1 < total_steps();
}

// What Trainer::save_checkpoint writes, less the optimiser state (the caller's own).
void Node::save_external_checkpoint(int64_t steps_done) {
  Checkpoint c;
  c.step = steps_done;
  c.rank = rank();
  c.peers = size();
  c.epoch = epoch();
  c.params = external_->download_params();
  if (hook_) c.extra = hook_->save_state();
  write_checkpoint(cfg_.checkpoint_dir, id(), c);
}

bool Node::average(std::span<float> params) {
  if (!external_) throw Error("gossip-peer", "average() is for a library peer");
  external_->rebind(params);
  return hook_ && hook_->finish(*external_);
}

void Node::report(double loss, double train_accuracy, double samples_per_s) {
  if (!external_) throw Error("gossip-peer", "report() is for a library peer");
  if (hook_) hook_->progress(0, *external_, loss, train_accuracy, samples_per_s);
}

Consensus Node::consensus(std::span<const float> params) {
  if (!external_) throw Error("gossip-peer", "consensus() is for a library peer");
  external_->check_size(params.size());
  if (!hook_) return {};
  return hook_->consensus(params.data());
}

int Node::rank() const { return view_ ? view_->rank() : rank_; }
int Node::id() const { return view_ ? view_->self_id() : rank_; }
int Node::size() const { return view_ ? view_->size() : 1; }
uint32_t Node::epoch() const { return view_ ? view_->epoch() : 0; }

// Binds before the data is loaded, so neighbours can queue messages to us while we start.
void Node::open_transport() {
  const bool joining = options_.join.has_value();
  tune_allocator_for_large_messages();
  ZmqTransportOptions opt;
  opt.rank = joining ? -1 : rank_;
  if (joining) opt.bind = options_.bind;
  else for (const auto& p : cfg_.peers.list) opt.endpoints.push_back(p.endpoint);
  opt.elastic = true;
  opt.heartbeat_s = cfg_.algorithm.heartbeat_s;
  opt.dead_after_s = cfg_.algorithm.dead_after_s;
  opt.watchers = cfg_.algorithm.watchers;
  opt.indirect_probes = cfg_.algorithm.indirect_probes;
  opt.rendezvous_dir = options_.rendezvous_dir;
  opt.run_id = run_id_from_environment();
  opt.chunk_bytes = static_cast<size_t>(cfg_.algorithm.chunk_bytes);
  opt.single_copy = cfg_.algorithm.single_copy;
  opt.checksum_always = cfg_.algorithm.checksum_always;
  opt.settings_digest = shared_settings_digest(cfg_);
  opt.timeout_s = cfg_.algorithm.timeout_s;
  opt.max_unverified_connections = static_cast<size_t>(cfg_.max_unverified_connections);
  if (!cfg_.keys_dir.empty()) {  // CurveZMQ on every socket, allow-list = every *.pub there
    if (joining && (options_.key_file.empty() || options_.join_key_file.empty()))
      throw Error("gossip-peer", cfg_.file + " uses security: --join also needs --key (ours) and --join-key (the contact's)");
    // A joiner brings its own key pair (the members learn its public key from the join request).
    const KeyPair own = read_keypair(joining ? options_.key_file : peer_path(cfg_.keys_dir, rank_, ".key"));
    opt.curve_public = own_public_key_ = own.public_key;
    opt.curve_secret = own.secret_key;
    if (!joining)
      for (int j = 0; j < n_; ++j) peer_keys_.push_back(read_public_key(peer_path(cfg_.keys_dir, j, ".pub")));
    opt.peer_public_keys = peer_keys_;
    opt.allowed_keys = read_allowed_keys(cfg_.keys_dir);
  }
  transport_ = std::make_unique<ZmqTransport>(opt);
  log("bound ", transport_->bound_endpoint(), ", algorithm ", algorithm_name(cfg_.algorithm.kind), ", topology ",
      topology::kind_name(cfg_.topology.kind), ", ", n_, " peers");
}

void Node::request_join() {
  join_started_ = std::chrono::steady_clock::now();
  const std::string contact_key = options_.join_key_file.empty() ? "" : read_public_key(options_.join_key_file);
  Membership::request_join(*transport_, *options_.join, contact_key, transport_->bound_endpoint(), own_public_key_,
                           {options_.external ? options_.external->size() : planned_num_params(cfg_),
                            shared_settings(cfg_)});
}

// The view (the YAML's, or the welcome's for a joiner), membership, the algorithm hook and the
// control channel.
void Node::start_membership() {
  transport_->set_max_total_floats(model().num_params() + 16);
  View initial;
  for (const auto& p : cfg_.peers.list)
    initial.members.push_back({p.id, p.endpoint, p.id < static_cast<int>(peer_keys_.size()) ? peer_keys_[p.id] : ""});
  initial.next_id = n_;
  std::optional<Welcome> welcome;
  if (options_.join) {
    const auto deadline = join_started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(cfg_.algorithm.timeout_s));
    welcome = Membership::await_welcome(*transport_, *options_.join, deadline, cfg_.algorithm.timeout_s);
    initial = welcome->view;
    rank_ = initial.rank_of(welcome->id);
    set_log_prefix("[peer " + std::to_string(welcome->id) + "] ");
  }
  const int id = welcome ? welcome->id : rank_;
  if (trainer_) trainer_->set_member_id(id);
  view_ = std::make_unique<ViewTransport>(*transport_, initial, id);
  if (welcome) view_->set_view(initial, id);
  membership_ = std::make_unique<Membership>(*transport_, *view_, cfg_.algorithm.timeout_s,
                                             JoinTerms{model().num_params(), shared_settings(cfg_)});
  if (welcome) membership_->note_admitted(welcome->admitted);
  hook_ = std::make_unique<DecentralizedHook>(cfg_, *view_, model().num_params(), membership_.get());
  hook_->set_leave_flag(options_.leave_flag);
  if (welcome) take_joiner_place(*welcome, initial);
  hook_->set_total_steps(total_steps());
  membership_->set_total_steps(total_steps());
  start_control(id, initial.epoch);
  if (trainer_) trainer_->set_hook(hook_.get());
}

// A joiner: its contact's model, its data shard and its first step.
void Node::take_joiner_place(const Welcome& welcome, const View& initial) {
  view_->suspend_interrupts(true);
  hook_->receive_start_model(model(), initial.rank_of(welcome.contact_id), welcome.round);
  view_->suspend_interrupts(false);
  if (trainer_) {
    trainer_->start_at(welcome.round, welcome.total_steps);
    trainer_->reshard(rank_, view_->size());
  } else {
    options_.external_steps = welcome.total_steps;  // the run's length, not the joiner's guess
  }
  hook_->start_at(welcome.round);
  start_step_ = welcome.round;
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - join_started_).count();
  const double since_start = std::chrono::duration<double, std::milli>(now - options_.started).count();
  log("joined as peer ", welcome.id, " (rank ", rank_, " of ", view_->size(), ", epoch ", initial.epoch,
      "), starting at step ", welcome.round, ", ", static_cast<int>(ms), " ms after the join request (",
      static_cast<int>(since_start), " ms after this peer started)");
}

void Node::start_control(int id, uint32_t epoch) {
  ControlInfo info{id, rank_, view_->size(), total_steps(), algorithm_name(cfg_.algorithm.kind), cfg_.topology,
                   model().num_params()};
  control_ = std::make_unique<ControlState>(info, view_.get());
  control_->set_view(id, rank_, view_->size(), epoch);
  hook_->set_control(control_.get());
  transport_->set_control_handler(control_.get());
  if (cfg_.metrics_port >= 0) {
    const int port = cfg_.metrics_port == 0 ? 0 : cfg_.metrics_port + rank_;
    metrics_ = std::make_unique<MetricsServer>(cfg_.metrics_host, port, [c = control_.get()] { return c->prometheus_text(); });
    log("metrics on http://", cfg_.metrics_host, ":", metrics_->port(), "/metrics");
  }
}

// Loads the newest checkpoint that every peer of the run has (agreed among them, so they restart
// at the same step) into the trainer, or a library peer's buffer and algorithm state.
void Node::resume() {
  const std::string who = "peer " + std::to_string(rank_);
  if (cfg_.checkpoint_dir.empty()) throw Error(cfg_.file, "--resume needs a 'checkpoint: {dir: ...}' section");
  std::optional<Checkpoint> c = newest_checkpoint(cfg_.checkpoint_dir, rank_);
  const int64_t mine = c ? c->step : -1;
  int64_t common = mine;
  if (hook_) {
    try {
      common = hook_->agree_min(mine);
    } catch (const MembershipInterrupt&) {
      throw Error(who, "cannot resume: " + hook_->membership_problem() +
                           " while the peers agreed on the checkpoint to resume from; start them again");
    }
  }
  if (common < 0)
    throw Error(who, std::string("cannot resume: ") + (c ? "another peer has" : "this peer has") +
                         " no intact checkpoint in " + cfg_.checkpoint_dir);
  std::string path = checkpoint_path(cfg_.checkpoint_dir, rank_, common);
  if (common != mine) {  // another peer is behind: go back to the step it has
    std::string problem;
    c = read_checkpoint(path, &problem);
    if (!c) throw Error(path, "the peers' newest common checkpoint is step " + std::to_string(common) +
                                  ", but this peer's file of that step cannot be used: " + problem);
  }
  const std::vector<int64_t> later = list_later_checkpoints(cfg_.checkpoint_dir, rank_);
  if (!later.empty() && later[0] > common)
    log(who, ": resuming with the YAML's membership at step ", common, "; its checkpoints up to step ", later[0],
        " were written after the membership changed and are not resumable");
  if (trainer_) {
    trainer_->restore(*c, path);
    return;
  }
  check_resumable(*c, path, external_->num_params(), rank_, n_, total_steps());
  external_->upload_params(c->params);
  if (hook_) hook_->restore_state(c->extra);
  start_step_ = c->step;
  log("peer ", rank_, ": resumed from ", path, " at step ", c->step, " (the caller's own state, e.g. its optimiser's, is not in it)");
}

std::string Node::final_line(const TrainResult& r) const {
  std::ostringstream out;
  // A language model's test set is the validation text: its accuracy is next-byte accuracy and
  // its loss is per byte, also given as bits per byte.
  out << std::fixed << std::setprecision(4) << "final: peer " << id() << " test_acc " << r.test.accuracy
      << " test_loss " << r.test.loss;
  if (r.test.per_byte) out << " test_bpb " << r.test.bits_per_byte();
  if (r.averaged) {
    out << " averaged_model_test_acc " << r.averaged->accuracy << " averaged_model_test_loss " << r.averaged->loss;
    if (r.averaged->per_byte) out << " averaged_model_test_bpb " << r.averaged->bits_per_byte();
  }
  out << (r.test.per_byte ? " tokens/s " : " samples/s ") << std::setprecision(0) << r.samples_per_s;
  if (trainer_) out << std::setprecision(1) << " train_s " << r.train_seconds;  // as the eval lines' train_s
  if (r.transfers.host_to_device || r.transfers.device_to_host) {  // a device backend: PCIe bytes per step
    const double steps = static_cast<double>(std::max<int64_t>(r.steps, 1));
    out << std::setprecision(3) << " h2d_MB_per_step " << r.transfers.host_to_device / 1e6 / steps
        << " d2h_MB_per_step " << r.transfers.device_to_host / 1e6 / steps;
  }
  {  // identifies the final model exactly (reproducibility checks, resume tests)
    const std::vector<float> p = trainer_ ? trainer_->model().download_params() : external_->download_params();
    out << " params_crc " << std::hex << crc32c(p.data(), p.size() * sizeof(float)) << std::dec;
  }
  if (transport_) {
    const auto s = transport_->stats();
    out << std::setprecision(1) << " sent_MB " << s.bytes_sent / 1e6 << " received_MB " << s.bytes_received / 1e6
        << " wait_s " << s.wait_seconds << " dropped " << s.messages_dropped;
    if (s.heartbeats_sent && s.seconds_up > 0) out << std::setprecision(2) << " heartbeats_per_s " << s.heartbeats_sent / s.seconds_up;
    if (s.view_messages_sent)
      out << " view_messages " << s.view_messages_sent << std::setprecision(1) << " view_KB " << s.view_bytes_sent / 1e3;
    if (s.bytes_lent) out << " lent_MB " << s.bytes_lent / 1e6;  // of sent_MB: copied by neighbours (single_copy)
    if (s.bytes_mapped) out << " mapped_MB " << s.bytes_mapped / 1e6;  // of received_MB: read from neighbours' shared regions
    if (s.connections_refused) out << " refused_connections " << s.connections_refused;
  }
  return out.str();
}

}  // namespace gossip::peer
