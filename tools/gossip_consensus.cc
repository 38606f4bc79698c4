// gossip-consensus: measures how far the peers' models are from their average, on a live run.
// Given one peer's endpoint (it discovers the others) or the YAML, it asks every peer for a
// snapshot at the same FUTURE round (nobody stops), fetches them and prints
//   Ξ = (1/n)·Σ‖x_i − x̄‖²,  Ξ/‖x̄‖²  and each peer's ‖x_i − x̄‖²,
// exactly (whole parameter vectors) or estimated from k-float count sketches (--sketch k).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <climits>
#include <deque>
#include <fstream>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "peer/config.h"
#include "transport/rendezvous.h"
#include "control/control.h"
#include "control/control_client.h"
#include "transport/zmq/curve_keys.h"
#include "control/sketch.h"
#include "svg_plot.h"

namespace {

using namespace gossip;
using peer::ControlOp;
using peer::ControlState;

struct Sample {
  int64_t round;
  peer::ConsensusFigures figures;
  double loss;
};

class Session {
 public:
  // keys_dir non-empty: CurveZMQ, with peer-R.pub of each member and the tool's own key pair.
  Session(std::vector<std::string> endpoints, int sketch, uint64_t seed, double timeout, const std::string& keys_dir,
          const peer::KeyPair& own)
      : sketch_(sketch), seed_(seed), timeout_(timeout) {
    for (size_t r = 0; r < endpoints.size(); ++r) {
      const std::string server =
          keys_dir.empty() ? "" : peer::read_public_key(peer_path(keys_dir, r, ".pub"));
      clients_.push_back(
          std::make_unique<peer::ControlClient>(context_, endpoints[r], server, own.public_key, own.secret_key));
    }
  }
  size_t size() const { return clients_.size(); }

  std::string status(size_t i) { return ask(i, ControlOp::kStatus, "{}").text; }

  // Asks every peer for round r; false (with the reason) if any peer refuses.
  bool request(int64_t r, std::string* why) {
    const std::string req = "{\"round\": " + std::to_string(r) + ", \"sketch\": " + std::to_string(sketch_) +
                            ", \"seed\": " + std::to_string(seed_) + "}";
    for (size_t i = 0; i < clients_.size(); ++i) {
      auto a = ask(i, ControlOp::kSnapshot, req);
      if (a.text.find("\"ok\"") == std::string::npos) {
        *why = clients_[i]->endpoint() + ": " + a.text;
        return false;
      }
    }
    return true;
  }

  // Waits for round r on every peer; nullopt if a peer finished without it.
  std::optional<Sample> fetch(int64_t r, double wait_s) {
    const std::string req = "{\"round\": " + std::to_string(r) + ", \"sketch\": " + std::to_string(sketch_) +
                            ", \"seed\": " + std::to_string(seed_) + "}";
    std::vector<std::vector<float>> x(clients_.size());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    for (size_t i = 0; i < clients_.size(); ++i) {
      for (;;) {
        auto a = ask(i, ControlOp::kFetch, req);
        if (a.is_values) {
          x[i] = std::move(a.values);
          break;
        }
        if (a.text.find("\"finished\": true") != std::string::npos) return std::nullopt;
        if (std::chrono::steady_clock::now() > deadline)
          throw Error(clients_[i]->endpoint(), "no snapshot of round " + std::to_string(r) + " within " +
                                                   number_text(wait_s) + " s (last answer " + escape_for_log(a.text, 200) + ")");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    double loss = 0;
    for (size_t i = 0; i < clients_.size(); ++i) {
      auto v = ControlState::json_number(status(i), "loss");  // null (a diverged loss) reads as NaN
      loss += v.value_or(std::nan("")) / clients_.size();
    }
    return Sample{r, peer::consensus_figures(x), loss};
  }

 private:
  // One request; a peer still loading its data answers "starting": ask again until timeout.
  peer::ControlAnswer ask(size_t i, ControlOp op, const std::string& json) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (;;) {
      peer::ControlAnswer a = clients_[i]->request(op, json, timeout_);
      if (a.is_values || a.text.find("peer is starting") == std::string::npos) return a;
      if (std::chrono::steady_clock::now() > deadline) throw Error(clients_[i]->endpoint(), "still starting");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  zmq::context_t context_;
  std::vector<std::unique_ptr<peer::ControlClient>> clients_;
  int sketch_;
  uint64_t seed_;
  double timeout_;
};

// Standard error of a sketched Ξ relative to Ξ, for deviations that are roughly uncorrelated:
// each ‖S·v_i‖² has variance 2‖v_i‖⁴/k, so sqrt(2/k · Σ d_i²) / Σ d_i.
double expected_error(const peer::ConsensusFigures& f, int k) {
  double sum = 0, sum_sq = 0;
  for (double d : f.distance) sum += d, sum_sq += d * d;
  return sum > 0 ? std::sqrt(2.0 / k * sum_sq) / sum : 0;
}

void print_row(const Sample& s, const std::string& format, bool header, int sketch) {
  const auto& f = s.figures;
  if (format == "csv") {
    if (header) {
      std::cout << "round,n,xi,relative,mean_norm2,loss";
      for (size_t i = 0; i < f.distance.size(); ++i) std::cout << ",peer" << i;
      std::cout << "\n";
    }
    std::cout << std::setprecision(9) << s.round << "," << f.distance.size() << "," << f.xi << "," << f.relative() << ","
              << f.mean_norm2 << "," << s.loss;
    for (double d : f.distance) std::cout << "," << d;
    std::cout << std::endl;
  } else if (format == "json") {
    // JSON has no NaN: a diverged run's figures are null.
    auto figure = [](double v) { return ControlState::json_figure(v, 9); };
    std::cout << "{\"round\": " << s.round << ", \"n\": " << f.distance.size() << ", \"xi\": " << figure(f.xi)
              << ", \"relative\": " << figure(f.relative()) << ", \"mean_norm2\": " << figure(f.mean_norm2)
              << ", \"loss\": " << figure(s.loss);
    if (sketch > 0) std::cout << ", \"sketch\": " << sketch << ", \"expected_error\": " << figure(expected_error(f, sketch));
    std::cout << ", \"distance\": [";
    for (size_t i = 0; i < f.distance.size(); ++i) std::cout << (i ? ", " : "") << figure(f.distance[i]);
    std::cout << "]}" << std::endl;
  } else {
    if (header)
      std::cout << " round   peers  consensus_distance  relative     loss     max_peer_distance"
                << (sketch > 0 ? "  expected_error" : "") << "\n";
    double mx = 0;
    for (double d : f.distance) mx = std::max(mx, d);
    std::cout << std::setw(6) << s.round << "  " << std::setw(6) << f.distance.size() << "  " << std::scientific
              << std::setprecision(4) << std::setw(18) << f.xi << "  " << std::setw(11) << f.relative() << "  "
              << std::fixed << std::setprecision(4) << std::setw(7) << s.loss << "  " << std::scientific
              << std::setprecision(4) << mx << std::defaultfloat;
    if (sketch > 0) std::cout << "  " << std::fixed << std::setprecision(1) << 100 * expected_error(f, sketch) << "%";
    std::cout << std::defaultfloat << std::endl;
  }
}

void add_flags(Flags& flags) {
  flags.add_string("peer", "endpoint of any live peer (tcp://host:port or ipc://path)", std::nullopt);
  flags.add_string("config", "the run's YAML instead of --peer", std::nullopt);
  flags.add_string("rendezvous", "with --config: where port-0 peers published their endpoints", std::nullopt);
  flags.add_string("sketch", "estimate from k-float count sketches instead of full parameters (0 = exact)", "0");
  flags.add_string("seed", "seed of the sketch's hash, shared by all peers", "1");
  flags.add_string("ahead", "rounds ahead of the fastest peer for the first snapshot", "20");
  flags.add_string("samples", "measurements to take (with --watch: 0 = until the run ends)", "1");
  flags.add_string("stride", "rounds between measurements", "10");
  flags.add_string("format", "table, csv or json", "table");
  flags.add_string("plot", "write consensus distance and loss against rounds to FILE.svg", std::nullopt);
  flags.add_string("timeout", "seconds to wait for one answer", "10");
  flags.add_string("keys", "CurveZMQ key directory of the run (peer-R.pub), when it uses security; --peer must then be peer 0's endpoint", std::nullopt);
  flags.add_string("key", "the tool's own key pair (default KEYS/tool.key)", std::nullopt);
  flags.add_bool("csv", "same as --format csv");
  flags.add_bool("json", "same as --format json");
  flags.add_bool("watch", "keep measuring (a live table) until --samples or the end of the run");
  flags.add_bool("status", "print every peer's status JSON and exit");
  flags.add_bool("help", "print this help");
}

// The members' endpoints, from a live peer's status (asked again while some are unresolved).
std::vector<std::string> members_from_peer(const std::string& endpoint, const std::string& keys_dir,
                                           const peer::KeyPair& own, double timeout) {
  zmq::context_t ctx;
  // The entry peer's key: the tool does not know its rank yet, so try each peer key in turn
  // only when security is on; peer 0's is the usual entry.
  peer::ControlClient entry(ctx, endpoint, keys_dir.empty() ? "" : peer::read_public_key(peer_path(keys_dir, 0, ".pub")),
                            own.public_key, own.secret_key);
  // Right after start-up a peer may not know every neighbour's port-0 endpoint yet: ask again.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    const std::string st = entry.request(ControlOp::kStatus, "{}", timeout).text;
    std::vector<std::string> members = peer::json_string_array(st, "members");
    if (members.empty() && st.find("peer is starting") == std::string::npos)
      throw Error(endpoint, "status lists no members: " + st);
    const bool resolved = !members.empty() && std::none_of(members.begin(), members.end(), [](const std::string& m) {
      return binds_any_port(m);
    });
    if (resolved) return members;
    if (std::chrono::steady_clock::now() > deadline) throw Error(endpoint, "some peers have not published their endpoints yet");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The members' endpoints, from the run's YAML (port-0 peers through the rendezvous directory).
std::vector<std::string> members_from_config(const std::string& file, const std::optional<std::string>& rendezvous) {
  peer::RunConfig cfg = peer::load_config(file);
  std::vector<std::string> members;
  for (const auto& p : cfg.peers.list) {
    std::string ep = p.endpoint;
    if (binds_any_port(ep)) {
      if (!rendezvous) throw Error(cfg.file, "peers bind port 0: give --rendezvous DIR or --peer");
      std::string stale;
      const std::optional<std::string> published =
          peer::read_published(*rendezvous, p.id, peer::run_id_from_environment(), &stale);
      if (!published)
        throw Error(*rendezvous, "peer " + std::to_string(p.id) + " has not published its endpoint" +
                                     (stale.empty() ? "" : " (" + stale + ")"));
      ep = *published;
    }
    members.push_back(ep);
  }
  return members;
}

struct Schedule {
  int64_t first = 0, total = 0, stride = 1, samples = 1;
};

// Measures at the rounds `schedule` names, printing a row for each; the samples taken.
std::vector<Sample> measure(Session& session, Schedule schedule, const std::string& format, int sketch, double timeout) {
  // Keep a window of requested rounds ahead of the one being fetched, so peers never wait.
  constexpr int kWindow = 16;
  std::deque<int64_t> requested;
  std::vector<Sample> taken;
  int64_t planned = 0, next = schedule.first;
  auto plan = [&] {
    while (static_cast<int64_t>(requested.size()) < kWindow && planned < schedule.samples && next <= schedule.total) {
      std::string why;
      if (session.request(next, &why)) {
        requested.push_back(next);
        ++planned;
      } else if (why.find("has passed") == std::string::npos) {
        throw Error("gossip-consensus", why);
      }
      next += schedule.stride;
    }
  };
  plan();
  while (!requested.empty()) {
    const int64_t r = requested.front();
    requested.pop_front();
    std::optional<Sample> s;
    try {
      s = session.fetch(r, 30 * timeout);
    } catch (const Error& e) {
      if (taken.empty()) throw;
      // Peers exit right after their last step: a silent peer after some samples is the end.
      std::cerr << "gossip-consensus: stopping: " << e.what() << "\n";
    }
    if (!s) break;  // the run ended
    print_row(*s, format, taken.empty(), sketch);
    taken.push_back(*s);
    plan();
  }
  if (taken.empty()) throw Error("gossip-consensus", "the run ended before any snapshot could be taken");
  return taken;
}

int run(int argc, char** argv) {
  Flags flags("gossip-consensus");
  add_flags(flags);
  flags.parse(argc, argv);
  if (flags.get_bool("help")) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  const double timeout = flags.get_double("timeout");
  const std::string format = flags.get_bool("csv") ? "csv" : flags.get_bool("json") ? "json" : flags.get_string("format");
  if (format != "table" && format != "csv" && format != "json")
    throw Error("gossip-consensus", "--format must be table, csv or json");
  const int sketch = static_cast<int>(flags.get_int("sketch"));
  if (sketch < 0) throw Error("gossip-consensus", "--sketch must be >= 0");
  if (flags.get_int("stride") < 1) throw Error("gossip-consensus", "--stride must be >= 1 (rounds between measurements)");
  if (flags.get_int("samples") < 0) throw Error("gossip-consensus", "--samples must be >= 0");
  if (flags.get_int("ahead") < 0) throw Error("gossip-consensus", "--ahead must be >= 0 (rounds ahead of the fastest peer)");
  if (flags.has("plot") && flags.get_string("plot").size() < 4)
    throw Error("gossip-consensus", "--plot wants a file name ending in .svg");
  std::string keys_dir;
  peer::KeyPair own;
  if (flags.has("keys")) {
    keys_dir = flags.get_string("keys");
    own = peer::read_keypair(flags.has("key") ? flags.get_string("key") : keys_dir + "/tool.key");
  }
  std::vector<std::string> members;
  if (flags.has("peer")) members = members_from_peer(flags.get_string("peer"), keys_dir, own, timeout);
  else if (flags.has("config"))
    members = members_from_config(flags.get_string("config"), flags.has("rendezvous") ? std::optional(flags.get_string("rendezvous")) : std::nullopt);
  else throw Error("gossip-consensus", "give --peer ENDPOINT or --config YAML\n" + flags.usage());

  Session session(members, sketch, static_cast<uint64_t>(flags.get_int("seed")), timeout, keys_dir, own);
  if (flags.get_bool("status")) {
    for (size_t i = 0; i < session.size(); ++i) std::cout << session.status(i) << "\n";
    return 0;
  }
  int64_t now = 0;
  Schedule schedule;
  for (size_t i = 0; i < session.size(); ++i) {
    const std::string st = session.status(i);
    now = std::max<int64_t>(now, static_cast<int64_t>(ControlState::json_number(st, "round").value_or(0)));
    schedule.total = static_cast<int64_t>(ControlState::json_number(st, "total_steps").value_or(0));
  }
  schedule.stride = flags.get_int("stride");
  schedule.samples = flags.get_int("samples");
  if (flags.get_bool("watch") && schedule.samples == 0) schedule.samples = INT64_MAX;
  schedule.first = now + flags.get_int("ahead");
  if (schedule.first > schedule.total)
    throw Error("gossip-consensus", "the run ends at round " + std::to_string(schedule.total) + ", now at " + std::to_string(now));
  if (sketch > 0 && format == "table")
    std::cout << "estimated from " << sketch << "-float count sketches; expected relative error of each row in its "
                 "last column (sqrt(2/k) per peer distance, less for their mean)\n";
  const std::vector<Sample> taken = measure(session, schedule, format, sketch, timeout);
  if (flags.has("plot")) {
    std::vector<tools::PlotPoint> pts;
    for (const auto& s : taken) pts.push_back({double(s.round), s.figures.xi, s.loss});
    tools::write_consensus_svg(flags.get_string("plot"),
                               "consensus distance and loss, " + std::to_string(session.size()) + " peers", pts);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
