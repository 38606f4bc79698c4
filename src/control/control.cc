#include "control/control.h"

#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <sstream>

#include "common/endpoint.h"
#include "common/log.h"
#include "control/sketch.h"

namespace gossip::peer {
namespace {

// Bounds on what requests can make a peer hold (a hostile tool must not exhaust its memory).
constexpr size_t kMaxKeptSnapshots = 256;         // oldest dropped beyond this many ...
constexpr size_t kMaxKeptFloats = size_t(64) << 20;  // ... or this many floats (256 MiB) in all
constexpr size_t kMaxPendingRequests = 1024;
constexpr int64_t kMaxSketch = 1 << 16;

// A JSON string whose text is printable ASCII only: quotes and backslashes escaped, every other
// byte outside 0x20..0x7e written as \u00XX (so a control byte never reaches a terminal, and the
// tool side can refuse any answer that holds one).
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (!is_printable_ascii(b)) {
      out += "\\u00" + hex_byte(b);
      continue;
    }
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string error_json(const std::string& e) { return "{\"error\": " + quote(e) + "}"; }

// An integer field in [lo, hi] (absent = 0); nullopt when present but out of range or fractional,
// so no double is ever cast to an integer it does not fit (found by the fuzzer).
std::optional<int64_t> json_integer(const std::string& json, const std::string& field, double lo, double hi) {
  const std::optional<double> v = ControlState::json_number(json, field);
  if (!v) return json.find("\"" + field + "\"") == std::string::npos ? std::optional<int64_t>(0) : std::nullopt;
  if (!(*v >= lo && *v <= hi) || *v != std::floor(*v)) return std::nullopt;
  return static_cast<int64_t>(*v);
}

}  // namespace

ControlState::ControlState(ControlInfo info, const Transport* transport)
    : info_(std::move(info)), transport_(transport) {}

std::optional<double> ControlState::json_number(const std::string& json, const std::string& field) {
  const std::string key = "\"" + field + "\"";
  size_t at = json.find(key);
  if (at == std::string::npos) return std::nullopt;
  at = json.find(':', at + key.size());
  if (at == std::string::npos) return std::nullopt;
  const char* start = json.c_str() + at + 1;
  char* end = nullptr;
  const double v = std::strtod(start, &end);
  if (end == start) return std::nullopt;
  return v;
}

std::string ControlState::json_figure(double v, int precision) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream out;
  out << std::setprecision(precision) << v;
  return out.str();
}

void ControlState::set_round(int64_t completed_steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  round_ = completed_steps;
}

void ControlState::set_members(std::vector<std::string> endpoints) {
  std::lock_guard<std::mutex> lock(mutex_);
  members_ = std::move(endpoints);
}

bool ControlState::members_unresolved() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int>(members_.size()) != info_.n) return true;
  for (const std::string& m : members_)
    if (binds_any_port(m)) return true;
  return false;
}

void ControlState::set_view(int id, int rank, int n, uint32_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  info_.id = id;
  info_.rank = rank;
  info_.n = n;
  epoch_ = epoch;
}

void ControlState::set_progress(double loss, double train_accuracy, double samples_per_s, double param_norm) {
  std::lock_guard<std::mutex> lock(mutex_);
  loss_ = loss;
  accuracy_ = train_accuracy;
  samples_per_s_ = samples_per_s;
  param_norm_ = param_norm;
}

void ControlState::set_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
}

bool ControlState::snapshot_due(int64_t completed_steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = wanted_.lower_bound(Key{completed_steps, 0, 0});
  return it != wanted_.end() && std::get<0>(it->first) == completed_steps;
}

void ControlState::capture(int64_t completed_steps, const float* x, size_t n) {
  std::vector<Key> keys;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = wanted_.lower_bound(Key{completed_steps, 0, 0});
         it != wanted_.end() && std::get<0>(it->first) == completed_steps; it = wanted_.erase(it))
      keys.push_back(it->first);
  }
  for (const Key& k : keys) {  // computed outside the lock: the comm thread keeps answering
    auto values = std::get<1>(k) == 0 ? std::make_shared<const std::vector<float>>(x, x + n)
                                      : std::make_shared<const std::vector<float>>(
                                            count_sketch(x, n, std::get<1>(k), std::get<2>(k)));
    std::lock_guard<std::mutex> lock(mutex_);
    captured_[k] = values;
    kept_floats_ += values->size();
    while (captured_.size() > 1 && (captured_.size() > kMaxKeptSnapshots || kept_floats_ > kMaxKeptFloats)) {
      kept_floats_ -= captured_.begin()->second->size();
      captured_.erase(captured_.begin());
    }
  }
}

std::string ControlState::status_json() {
  // Caller holds mutex_.
  std::ostringstream out;
  out << "{\"id\": " << info_.id << ", \"rank\": " << info_.rank << ", \"round\": " << round_
      << ", \"total_steps\": " << info_.total_steps << ", \"finished\": " << (finished_ ? "true" : "false")
      << ", \"epoch\": " << epoch_ << ", \"algorithm\": " << quote(info_.algorithm)
      << ", \"topology\": " << quote(topology::kind_name(info_.graph.kind)) << ", \"num_params\": " << info_.num_params
      << ", \"members\": [";
  for (int i = 0; i < info_.n; ++i) out << (i ? ", " : "") << quote(i < static_cast<int>(members_.size()) ? members_[i] : "?");
  out << "]";
  try {
    const topology::Neighbours nb = topology::neighbours(info_.graph, info_.n, info_.rank, round_);
    out << ", \"neighbours\": {\"self\": " << nb.self_weight << ", \"in\": " << topology::links_json(nb.in, 6)
        << ", \"out\": " << topology::links_json(nb.out, 6) << "}";
  } catch (const std::exception&) {
  }
  out << ", \"loss\": " << json_figure(loss_) << ", \"train_accuracy\": " << json_figure(accuracy_)
      << ", \"samples_per_s\": " << json_figure(samples_per_s_) << ", \"param_norm\": " << json_figure(param_norm_);
  if (transport_) {
    const TransportStats s = transport_->stats();
    out << ", \"bytes_sent\": " << s.bytes_sent << ", \"bytes_received\": " << s.bytes_received
        << ", \"wait_s\": " << s.wait_seconds << ", \"messages_dropped\": " << s.messages_dropped
        << ", \"connections_refused\": " << s.connections_refused;
  }
  out << "}";
  return out.str();
}

std::string ControlState::prometheus_text() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  const std::string label = "{peer=\"" + std::to_string(info_.rank) + "\"}";
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << label << " " << value << "\n";
  };
  metric("gossip_round", "gauge", "Training steps completed.", static_cast<double>(round_));
  metric("gossip_total_steps", "gauge", "Steps this run will take.", static_cast<double>(info_.total_steps));
  metric("gossip_peers", "gauge", "Members of the run.", info_.n);
  metric("gossip_membership_epoch", "gauge", "Membership epoch.", epoch_);
  metric("gossip_loss", "gauge", "Mean training loss over the last progress interval.", loss_);
  metric("gossip_train_accuracy", "gauge", "Training accuracy over the last progress interval.", accuracy_);
  metric("gossip_samples_per_second", "gauge", "Training throughput over the last progress interval.", samples_per_s_);
  metric("gossip_param_norm", "gauge", "L2 norm of the parameters at the last progress line.", param_norm_);
  if (transport_) {
    const TransportStats s = transport_->stats();
    metric("gossip_bytes_sent_total", "counter", "Bytes sent to neighbours.", static_cast<double>(s.bytes_sent));
    metric("gossip_bytes_received_total", "counter", "Bytes received from neighbours.", static_cast<double>(s.bytes_received));
    metric("gossip_wait_seconds_total", "counter", "Time the training thread waited for neighbours.", s.wait_seconds);
    metric("gossip_messages_dropped_total", "counter", "Malformed or foreign messages dropped.",
           static_cast<double>(s.messages_dropped));
    metric("gossip_connections_refused_total", "counter",
           "Connections closed over the cap on connections that sent no valid message yet.",
           static_cast<double>(s.connections_refused));
  }
  return out.str();
}

ControlReply ControlState::handle(uint32_t op, const std::string& request) noexcept {
  ControlReply reply;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    switch (static_cast<ControlOp>(op)) {
      case ControlOp::kStatus:
        reply.text = status_json();
        return reply;
      case ControlOp::kSnapshot: {
        const auto r = json_integer(request, "round", 0, 1e15);
        const auto k = json_integer(request, "sketch", 0, double(kMaxSketch));
        const auto seed = json_integer(request, "seed", 0, 1e15);
        if (!r || !k || !seed) {
          reply.text = error_json("snapshot needs {\"round\": R >= 0, \"sketch\": 0 <= k <= 65536, \"seed\": s >= 0}");
        } else if (wanted_.size() >= kMaxPendingRequests) {
          reply.text = error_json("too many snapshot requests pending");
        } else if (*r <= round_) {
          reply.text = error_json("round " + std::to_string(*r) + " has passed (now " + std::to_string(round_) + ")");
        } else if (*r > info_.total_steps) {
          reply.text = error_json("the run ends at round " + std::to_string(info_.total_steps));
        } else {
          wanted_[Key{*r, static_cast<int>(*k), static_cast<uint64_t>(*seed)}] = true;
          reply.text = "{\"ok\": true}";
        }
        return reply;
      }
      case ControlOp::kFetch: {
        const auto r = json_integer(request, "round", 0, 1e15);
        const auto k = json_integer(request, "sketch", 0, double(kMaxSketch));
        const auto seed = json_integer(request, "seed", 0, 1e15);
        auto it = r && k && seed ? captured_.find(Key{*r, static_cast<int>(*k), static_cast<uint64_t>(*seed)})
                                 : captured_.end();
        if (it == captured_.end()) {
          reply.text = "{\"ready\": false, \"round\": " + std::to_string(round_) +
                       ", \"finished\": " + (finished_ ? "true" : "false") + "}";
        } else {
          reply.floats = true;
          reply.values = it->second;
        }
        return reply;
      }
    }
    reply.text = error_json("unknown control operation " + std::to_string(op));
  } catch (const std::exception& e) {
    reply.floats = false;
    reply.text = error_json(e.what());
  }
  return reply;
}

}  // namespace gossip::peer
