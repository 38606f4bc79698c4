#include "peer/decentralized_hook.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "membership/membership.h"
#include "wire/wire_format.h"

namespace gossip::peer {

DecentralizedHook::DecentralizedHook(const RunConfig& config, Transport& transport, size_t floats, Membership* membership)
    : algo_(config.algorithm),
      consensus_every_(config.consensus_every),
      log_every_(config.log_every),
      t_(&transport),
      floats_(floats),
      seed_(config.seed),
      allreduce_(new_allreduce()),
      membership_(membership) {
  const size_t chunk = static_cast<size_t>(algo_.chunk_bytes) / sizeof(float);
  const bool diloco_gossip = algo_.kind == Algorithm::kDiloco && algo_.outer_average == OuterAverage::kGossip;
  if (algo_.kind == Algorithm::kDiloco)
    diloco_.emplace(floats, static_cast<float>(algo_.outer_lr), static_cast<float>(algo_.outer_momentum));
  if (algo_.kind == Algorithm::kGossip || diloco_gossip)
    gossip_.emplace(transport, config.topology, floats, chunk, algo_.timeout_s, algo_.max_norm_ratio, algo_.wire);
  if (algo_.kind == Algorithm::kChoco)
    choco_.emplace(transport, config.topology, floats, chunk, algo_.timeout_s, algo_.max_norm_ratio,
                   Compressor{algo_.compressor, algo_.ratio, config.seed}, static_cast<float>(algo_.consensus_step));
  if (algo_.gradient_tracking)
    tracker_.emplace(transport, config.topology, floats, chunk, algo_.timeout_s, algo_.max_norm_ratio);
  if (algo_.kind == Algorithm::kPushSum)
    push_sum_.emplace(transport, config.topology, floats, chunk, algo_.timeout_s, algo_.overlap, algo_.max_staleness,
                      algo_.wire);
}

RingAllReduce DecentralizedHook::new_allreduce() const {
  return RingAllReduce(*t_, static_cast<size_t>(algo_.chunk_bytes) / sizeof(float), algo_.timeout_s, seed_);
}

float* DecentralizedHook::host_params(model::Model& model) {
  if (model.backend().is_host()) return model.params();
  host_.resize(floats_);
  model.backend().download(host_.data(), model.params(), floats_ * sizeof(float));
  return host_.data();
}

void DecentralizedHook::store_params(model::Model& model) {
  if (!model.backend().is_host()) model.backend().upload(model.params(), host_.data(), floats_ * sizeof(float));
}

void DecentralizedHook::before_step(int64_t step, model::Model& model) {
  if (push_sum_ && !push_sum_started_) {
    push_sum_->init(model.params(), &model.backend());  // the numerator lives beside the model
    if (!restored_push_sum_.empty()) push_sum_->restore_state(restored_push_sum_, "peer " + std::to_string(t_->rank()));
    restored_push_sum_.clear();
    push_sum_started_ = true;
  }
  if (diloco_ && !diloco_->started()) diloco_->start(host_params(model), true);
  // Only at the run's first step, which every starting member takes and no joiner does: after a
  // view change the members' models differ anyway, and an extra collective there would be one
  // more point where members that saw the change and members that did not yet could part ways.
  if (choco_ && choco_->dense_next() && step == 0) start_choco_from_common_model(step, model);
}

// Compared by fingerprint: every peer sees the same all-reduced fingerprints, so all decide alike.
// At a run's start with `init: same` this saves the uncompressed round (one model per neighbour).
void DecentralizedHook::start_choco_from_common_model(int64_t step, model::Model& model) {
  const float* x = host_params(model);
  const uint64_t fingerprint = model_fingerprint(x, floats_);
  bool same = false;
  guarded(step, model, [&] { same = all_equal(allreduce_, t_->size(), t_->rank(), fingerprint); });
  if (same) choco_->start_from(x);  // (an interrupted check left same false and the copies reset)
}

void DecentralizedHook::before_update(int64_t step, model::Model& model) {
  if (!tracker_) return;
  // As after_step's mix: an interrupted round changes the view and is tried again unless the new
  // view resumes later, when this step is a local one (the gradient left as it was).
  for (;;) {
    if (step < resume_round_) return;  // a skipped round: a local step only
    if (guarded(step, model, [&] { track_gradient(step, model); })) return;
  }
}

void DecentralizedHook::track_gradient(int64_t step, model::Model& model) {
  const auto round = static_cast<uint64_t>(step);
  if (model.backend().is_host()) {
    tracker_->track(model.grads(), round);
    return;
  }
  host_grads_.resize(floats_);
  model.backend().download(host_grads_.data(), model.grads(), floats_ * sizeof(float));
  tracker_->track(host_grads_.data(), round);
  model.backend().upload(model.grads(), host_grads_.data(), floats_ * sizeof(float));
}

void DecentralizedHook::outer_step(int64_t step, float* x) {
  delta_.resize(floats_);
  diloco_->pseudo_gradient(x, delta_.data());
  if (algo_.outer_average == OuterAverage::kAllReduce) {
    global_average(delta_.data(), algo_.wire);
  } else {  // gossip rounds, numbered by outer step so that every peer uses the same graphs
    delta_out_.resize(floats_);
    const int64_t outer = (step + 1) / algo_.inner_steps - 1;
    for (int r = 0; r < algo_.gossip_rounds; ++r) {
      gossip_->step(static_cast<uint64_t>(outer * algo_.gossip_rounds + r), delta_.data(), delta_out_.data());
      delta_.swap(delta_out_);
    }
  }
  diloco_->outer_step(delta_.data(), x);
}

void DecentralizedHook::global_average(float* x, Dtype wire) {
  if (!push_sum_) {
    if (!membership_) {
      allreduce_.average(x, floats_, wire);
      return;
    }
    // Elastic: on a copy, so an all-reduce abandoned half-way leaves the model intact.
    scratch_.assign(x, x + floats_);
    allreduce_.average(scratch_.data(), floats_, wire);
    std::copy(scratch_.begin(), scratch_.end(), x);
    return;
  }
  // Push-sum: average numerators and weights together, so every peer ends at Σx / Σw.
  scratch_ = push_sum_->numerator();
  scratch_.push_back(static_cast<float>(push_sum_->weight()));
  allreduce_.average(scratch_.data(), scratch_.size());
  push_sum_->set_state(scratch_.data(), scratch_.back());
  const float inv = 1.0f / scratch_.back();
  for (size_t i = 0; i < floats_; ++i) x[i] = scratch_[i] * inv;
}

template <class F>
bool DecentralizedHook::guarded(int64_t round, model::Model& model, F&& f) {
  try {
    f();
    return true;
  } catch (const MembershipInterrupt&) {
    if (!membership_) throw;  // only elastic transports interrupt
    change_view(round, model);
    return false;
  }
}

// The buffer a host model's gossip mixes into (the two then trade places every round). With
// single copy both are shared regions, so the neighbours fold our values where they lie: the
// parameters move into one once, here. Returns the parameters.
float* DecentralizedHook::make_spare(model::Model& model) {
  if (!algo_.single_copy) {
    spare_ = kernels::DeviceArray<float>(model.backend(), floats_);
    return model.params();
  }
  spare_ = kernels::DeviceArray<float>::shared(model.backend(), floats_);
  auto params = kernels::DeviceArray<float>::shared(model.backend(), floats_);
  std::memcpy(params.get(), model.params(), floats_ * sizeof(float));
  model.adopt_params(params);  // (a caller's buffer stays where it is: its values are copied out)
  return model.params();
}

void DecentralizedHook::mix(int64_t step, model::Model& model) {
  if (diloco_ && (step + 1) % algo_.inner_steps != 0) return;  // an inner step: nothing to exchange
  const int h = algo_.global_average_every;
  const bool global = h > 0 && (step + 1) % h == 0;
  if (gossip_ && !diloco_ && !global && !model.backend().is_host()) {
    device_gossip(step, model);
    return;
  }
  if (push_sum_ && !global) {  // where the model lies (on a device: its kernels)
    push_sum_->set_total_rounds(static_cast<uint64_t>(total_steps_));
    push_sum_->step(static_cast<uint64_t>(step), model.params());
    return;
  }
  float* x = host_params(model);
  if (diloco_) {
    outer_step(step, x);
    store_params(model);
    return;
  }
  if (global) {
    global_average(x);
  } else if (gossip_) {
    // Mix into the spare buffer, then let the model adopt it (no copy, but for a caller's buffer).
    if (spare_.size() != floats_) x = make_spare(model);
    gossip_->step(static_cast<uint64_t>(step), x, spare_.get());
    model.adopt_params(spare_);
  } else if (choco_) {
    choco_->step(static_cast<uint64_t>(step), x);
  }
  store_params(model);
}

// A gossip round of a model on a device: the values come down once (with the bf16 wire only
// their rounding, half the bytes), are sent and screen the chunks; the mix runs on the device
// into the spare, which the model adopts: nothing goes up but the received chunks.
void DecentralizedHook::device_gossip(int64_t step, model::Model& model) {
  if (spare_.size() != floats_) spare_ = kernels::DeviceArray<float>(model.backend(), floats_);
  const float* x = algo_.wire == Dtype::kBf16 ? nullptr : host_params(model);
  gossip_->step(static_cast<uint64_t>(step), x, GossipStep::OnDevice{&model.backend(), model.params(), spare_.get()});
  model.adopt_params(spare_);
}

void DecentralizedHook::after_step(int64_t step, model::Model& model) {
  if (leave_flag_ && leave_flag_->load() && membership_) {
    membership_->announce_leave(step);
    left_ = true;
    return;
  }
  // With a tracker this step's round began before the optimiser step (before_update), so the
  // first whole round this peer can still take part in is the next one: a view change here
  // resumes there, or the others would open round `step` with the tracker while this peer
  // repeated only the model's half of it.
  const int64_t next_round = tracker_ ? step + 1 : step;
  for (;;) {
    if (membership_ && membership_->pending()) change_view(next_round, model);
    if (step < resume_round_) break;  // a view change skipped this round: local step only
    if (guarded(next_round, model, [&] { mix(step, model); })) break;
  }
  // A device model's parameters come down only where a snapshot or Ξ needs them.
  if (control_) {
    control_->set_round(step + 1);
    if (control_->members_unresolved()) publish_members();
    if (control_->snapshot_due(step + 1)) control_->capture(step + 1, host_params(model), floats_);
  }
  if (consensus_every_ > 0 && (step + 1) % consensus_every_ == 0 && (step + 1) % log_every_ != 0 &&
      step >= resume_round_ && !asynchronous()) {
    guarded(step + 1, model, [&] {
      Consensus c = consensus(host_params(model));
      if (t_->rank() == 0) log_consensus(step, c);
    });
  }
}

void DecentralizedHook::change_view(int64_t round, model::Model& model) {
  std::optional<ViewChange> change = membership_->agree(round);
  if (!change) return;
  if (change->cut_off) {
    rejoin(*change->cut_off, model);
    return;
  }
  resume_round_ = std::max(resume_round_, change->resume_round);
  reshard_ = true;
  final_mean_ready_ = false;
  allreduce_ = new_allreduce();
  float* x = host_params(model);
  if (push_sum_ && push_sum_started_)  // the weight rule: (x, w) ← (x/w, 1), de-biased model unchanged
    push_sum_->init(model.params(), &model.backend());
  if (choco_) choco_->reset();  // new neighbours: every member starts its public copies again
  if (tracker_) tracker_->reset();
  if (control_) {
    control_->set_view(change->view.members.at(t_->rank()).id, t_->rank(), t_->size(), change->view.epoch);
    publish_members();
  }
  for (const JoinRequest& j : change->welcome) {
    membership_->send_welcome(*change, j, total_steps_);
    int rank = -1;  // the joiner's rank in the new view
    for (size_t i = 0; i < change->view.members.size(); ++i)
      if (change->view.members[i].endpoint == j.endpoint) rank = static_cast<int>(i);
    if (rank < 0) continue;
    // The joiner starts from this peer's current model; it arrives before any round-R message.
    auto copy = std::make_shared<std::vector<float>>(x, x + floats_);
    send_vector(*t_, rank, {MessageKind::kModel, static_cast<uint64_t>(change->resume_round), 0}, copy->data(), copy,
                0, floats_, floats_, 0, static_cast<size_t>(algo_.chunk_bytes) / sizeof(float));
  }
}

// Cut off: stop mixing, ask the run to take this peer back, and start again from the contact's
// model at the round the welcome names, as a joiner does (the trainer jumps there).
void DecentralizedHook::rejoin(const std::string& why, model::Model& model) {
  const Welcome w = membership_->rejoin(why);
  if (w.round >= total_steps_) throw CutOff("peer " + std::to_string(w.id), why + "; the run has ended");
  allreduce_ = new_allreduce();
  if (push_sum_ && push_sum_started_) push_sum_->drain_discard();
  membership_->suspend_interrupts(true);
  receive_start_model(model, w.view.rank_of(w.contact_id), w.round);
  membership_->suspend_interrupts(false);
  if (push_sum_ && push_sum_started_) push_sum_->init(model.params(), &model.backend());
  if (diloco_) diloco_->start(host_params(model), true);  // the contact's model, no outer momentum
  if (choco_) choco_->reset();
  if (tracker_) tracker_->reset();
  resume_round_ = w.round;
  rejoined_at_ = w.round;
  reshard_ = true;
  final_mean_ready_ = false;
  if (control_) {
    control_->set_view(w.id, t_->rank(), t_->size(), w.view.epoch);
    publish_members();
  }
}

bool DecentralizedHook::rejoined(int64_t* next_step) {
  if (!rejoined_at_) return false;
  *next_step = *rejoined_at_;
  rejoined_at_.reset();
  return true;
}

void DecentralizedHook::receive_start_model(model::Model& model, int contact_rank, int64_t round) {
  float* x = host_params(model);
  const Received r = receive_vector(*t_, contact_rank, {MessageKind::kModel, static_cast<uint64_t>(round), 0}, 0, floats_,
                                    floats_, algo_.timeout_s, [x](size_t i, const float* v, size_t c) { std::copy(v, v + c, x + i); });
  if (!r.finite) throw Error("gossip-peer", "the model sent by " + t_->describe(contact_rank) + " holds NaN or Inf");
  store_params(model);
}

bool DecentralizedHook::view_changed(int* rank, int* n) {
  if (!reshard_) return false;
  reshard_ = false;
  *rank = t_->rank();
  *n = t_->size();
  return true;
}

Consensus DecentralizedHook::consensus(const float* x) {
  return consensus_distance(allreduce_, t_->size(), t_->rank(), x, floats_, scratch_);
}

std::string DecentralizedHook::log_extra(int64_t step, model::Model& model) {
  // A peer that has just announced its leave takes part in no more collectives: the members
  // dropped it, and waiting for them would end in its own cut-off.
  if (left_ || step < resume_round_) return "";
  if (asynchronous()) {  // Ξ is a collective: every peer would wait here for the slowest
    const TransportStats s = t_->stats();
    std::ostringstream out;
    out << std::fixed << std::setprecision(1) << " consensus n/a (asynchronous) sent_MB " << s.bytes_sent / 1e6
        << " wait_s " << s.wait_seconds;
    return out.str();
  }
  Consensus c;
  if (!guarded(step + 1, model, [&] { c = consensus(host_params(model)); })) return " (membership changed)";
  // Push-sum's final average is of (x·w, w), not of the de-biased x measured here.
  final_mean_ready_ = step + 1 == total_steps_ && !push_sum_;
  const TransportStats s = t_->stats();
  std::ostringstream out;
  out << std::scientific << std::setprecision(3) << " consensus " << c.distance << " rel " << c.relative()
      << std::fixed << std::setprecision(1) << " sent_MB " << s.bytes_sent / 1e6 << " wait_s " << s.wait_seconds;
  if (membership_) out << " peers " << t_->size();
  if (consensus_every_ > 0 && (step + 1) % consensus_every_ == 0 && t_->rank() == 0) log_consensus(step, c);
  return out.str();
}

std::string DecentralizedHook::live_extra() {
  const TransportStats s = t_->stats();
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << " sent_MB " << s.bytes_sent / 1e6 << " received_MB "
      << s.bytes_received / 1e6 << " peers " << t_->size();
  return out.str();
}

void DecentralizedHook::set_control(ControlState* control) {
  control_ = control;
  if (control_) publish_members();
}

// The members' endpoints for status replies (read here, on the training thread: a port-0
// neighbour's may come from its rendezvous file).
void DecentralizedHook::publish_members() {
  std::vector<std::string> endpoints;
  for (int i = 0; i < t_->size(); ++i) endpoints.push_back(t_->endpoint_of(i));
  control_->set_members(std::move(endpoints));
}

void DecentralizedHook::log_consensus(int64_t step, const Consensus& c) {
  std::ostringstream line;
  line << std::scientific << std::setprecision(4) << "consensus step " << step + 1 << " xi " << c.distance << " rel "
       << c.relative();
  log(line.str());
}

void DecentralizedHook::progress(int64_t, model::Model& model, double loss, double accuracy, double samples_per_s) {
  if (!control_) return;
  const float* x = host_params(model);
  control_->set_progress(loss, accuracy, samples_per_s, std::sqrt(sum_squares(x, floats_)));
}

// Elastic: a member may have started a view change (a crash during the final evaluation) that
// another has not seen yet. Every member answers this small collective before taking the kept
// average, so a change interrupts all of them here as it would interrupt the final all-reduce,
// and a member that had no kept average makes all of them average again.
bool DecentralizedHook::reuse_final_mean() {
  if (!membership_) return final_mean_ready_;
  return agree_min(final_mean_ready_ ? 1 : 0) == 1;  // the smallest flag: 1 only if all kept it
}

bool DecentralizedHook::finish(model::Model& model) {
  if (left_) return false;  // left the run: its own model is its result
  for (;;) {
    if (membership_ && membership_->pending()) change_view(total_steps_, model);
    const bool done = guarded(total_steps_, model, [&] {
      if (push_sum_ && push_sum_started_) push_sum_->drain(model.params());
      float* x = host_params(model);
      if (reuse_final_mean())  // the last progress line's Ξ averaged this very model
        std::copy(scratch_.begin(), scratch_.end(), x);
      else
        global_average(x);
      store_params(model);
    });
    if (done) break;
  }
  if (control_) control_->set_finished();
  return true;
}

}  // namespace gossip::peer

namespace gossip::peer {

std::vector<float> DecentralizedHook::save_state() {
  if (diloco_) return diloco_->started() ? diloco_->save_state() : std::vector<float>{};
  if (choco_) return choco_->save_state();
  if (tracker_) return tracker_->save_state();
  if (!push_sum_) return {};
  if (!push_sum_started_) return restored_push_sum_;  // (empty unless a state waits for the model)
  return push_sum_->save_state();
}

void DecentralizedHook::restore_state(const std::vector<float>& state) {
  if (diloco_ && !state.empty()) {
    diloco_->restore_state(state, "peer " + std::to_string(t_->rank()));
    return;
  }
  if (choco_ && !state.empty()) {
    choco_->restore_state(state, "peer " + std::to_string(t_->rank()));
    return;
  }
  if (tracker_ && !state.empty()) {
    tracker_->restore_state(state, "peer " + std::to_string(t_->rank()));
    return;
  }
  if (!push_sum_ || state.empty()) return;
  // Restored at the first step, where the model says in whose memory the numerator lives.
  push_sum_->check_state(state, "peer " + std::to_string(t_->rank()));
  restored_push_sum_ = state;
  push_sum_started_ = false;
}

int64_t DecentralizedHook::agree_min(int64_t value) { return peer::agree_min(allreduce_, t_->size(), t_->rank(), value); }

std::string DecentralizedHook::membership_problem() {
  if (!membership_) return "a membership change";
  const std::string silent = membership_->describe_suspects();
  return silent.empty() ? "a membership change (a join, a leave or a view-change proposal)"
                        : silent + " went silent (suspected dead)";
}

}  // namespace gossip::peer
