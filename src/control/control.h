// What a peer answers on its control channel: status (id, round, members, neighbours, loss,
// traffic, ...) and snapshots of its parameters taken at a FUTURE round, so a tool can compare
// all peers at the same round without stopping them. The training thread writes, the comm thread
// answers; every method is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "transport/control_handler.h"
#include "transport/transport.h"
#include "topology/topology.h"

namespace gossip::peer {

struct ControlInfo {
  int id = 0;  // the peer's stable id (its rank in a fixed run; an elastic run's ranks change)
  int rank = 0;
  int n = 1;
  int64_t total_steps = 0;
  std::string algorithm;
  topology::Graph graph;
  size_t num_params = 0;
};

class ControlState final : public ControlHandler {
 public:
  // `transport` (may be null) gives the traffic counters; it outlives this object.
  ControlState(ControlInfo info, const Transport* transport);

  // Training thread.
  void set_round(int64_t completed_steps);
  // The members' endpoints by rank, as the status reports them. Set by the training thread (a
  // port-0 endpoint may need a rendezvous file read), so answering on the comm thread never
  // touches the transport or the disk; unresolved while any is missing or still a port-0 one.
  void set_members(std::vector<std::string> endpoints);
  bool members_unresolved();
  // After a membership change: this peer's id (new after a rejoin), rank, the member count and the epoch.
  void set_view(int id, int rank, int n, uint32_t epoch);
  void set_progress(double loss, double train_accuracy, double samples_per_s, double param_norm);
  // True when some request wants the model as it is after `completed_steps` steps.
  bool snapshot_due(int64_t completed_steps);
  void capture(int64_t completed_steps, const float* x, size_t n);
  void set_finished();

  // Prometheus text exposition of the status (any thread).
  std::string prometheus_text();

  // Comm thread.
  ControlReply handle(uint32_t op, const std::string& request) noexcept override;

  // "field": number from a flat JSON object; nullopt when absent (tiny parser for our own
  // requests, which hold numbers only).
  static std::optional<double> json_number(const std::string& json, const std::string& field);
  // A figure as JSON text with `precision` significant digits; NaN and infinities (a diverged
  // loss) are null, which JSON has, not "nan", which it does not.
  static std::string json_figure(double v, int precision = 6);

 private:
  using Key = std::tuple<int64_t, int, uint64_t>;  // round, sketch k (0 = full), seed
  std::string status_json();

  ControlInfo info_;
  const Transport* transport_;  // for its traffic counters (atomics) only
  std::vector<std::string> members_;
  std::mutex mutex_;
  int64_t round_ = 0;                // guarded by mutex_, as is everything below (and info_.rank, .n)
  uint32_t epoch_ = 0;
  bool finished_ = false;
  double loss_ = 0, accuracy_ = 0, samples_per_s_ = 0, param_norm_ = 0;
  std::map<Key, bool> wanted_;       // requested, not captured yet
  std::map<Key, std::shared_ptr<const std::vector<float>>> captured_;
  size_t kept_floats_ = 0;           // Σ sizes in captured_
};

}  // namespace gossip::peer
