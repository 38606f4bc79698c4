// The view-change agreement at size, simulated: N members, one thread each, run the real
// membership code (Membership::agree over ViewTransport) over the in-process transport, for one
// event, and print how long until every member had the new view (or, on the losing side of a
// partition, knew it was cut off) and how many view-change messages and bytes each member sent.
//   agreement_bench --peers N --event crash|join|partition [--watchers W]
//                   [--latency-ms L --jitter-ms J --loss P]
// crash: member N/3 stops (nothing to or from it arrives) and only its W watchers are told (the
// failure detector's steady state; W = 0: every member is told, as by an all-to-all detector).
// join: a new peer asks member 0.
// partition: the members split in two halves (ranks below N/2 and the rest); nothing crosses, and
// every member is told of every member on the other side (what the failure detector's view-change
// mode, every member watching every other, reports after dead_after_s). At exactly half the half
// holding id 0 keeps the run; the other is cut off.
// Every message waits L ms plus up to J ms on the way, and a view-change message is lost with
// chance P (the agreement repeats what it must; joins and welcomes are not lost).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sys/resource.h>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/flags.h"
#include "membership/membership.h"
#include "transport/inproc/inproc_transport.h"

namespace gossip::peer {
namespace {

constexpr size_t kParams = 1000;
constexpr int64_t kRound = 10;

View first_view(int n) {
  View v;
  for (int i = 0; i < n; ++i) v.members.push_back({i, "inproc://" + std::to_string(i), ""});
  v.next_id = n;
  return v;
}

// User + system CPU time of this process so far: the simulation runs every member on this
// machine's cores, so at size the time to agree is bound by this (see the table's last column).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

struct Outcome {
  Clock::time_point done;
  bool cut_off = false;
};

// Takes part in view changes until this member's view reaches epoch 1, or it is cut off.
Outcome take_part(MembershipPort& port, const View& start, int id, double timeout_s) {
  ViewTransport view(port, start, id);
  view.set_view(start, id);
  Membership membership(port, view, timeout_s, {kParams, ""});
  const auto deadline = Clock::now() + std::chrono::duration<double>(2 * timeout_s);
  while (view.view().epoch < 1) {
    if (Clock::now() > deadline) throw Error("member " + std::to_string(id), "no view change settled");
    if (!membership.pending()) {  // (a training peer waits in a receive that a proposal interrupts)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    std::optional<ViewChange> change = membership.agree(kRound);
    if (change && change->cut_off) return {Clock::now(), true};
    if (change)
      for (const JoinRequest& j : change->welcome) membership.send_welcome(*change, j, 100);
  }
  return {Clock::now(), false};
}

// Starts the event at the fabric; returns the joiner's thread for a join.
std::thread start_event(const std::string& event, int n, int watchers, InprocFabric& fabric,
                        std::vector<std::unique_ptr<InprocTransport>>& ports) {
  if (event == "crash") {
    const int victim = n / 3;
    fabric.set_reachable(victim, false);
    const int told = watchers <= 0 || watchers >= n - 1 ? n - 1 : watchers;
    for (int d = 1; d <= told; ++d) ports[(victim + d) % n]->suspect(victim);
    return {};
  }
  if (event == "partition") {
    for (int i = n / 2; i < n; ++i) fabric.set_side(i, 1);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if ((i < n / 2) != (j < n / 2)) ports[i]->suspect(j);
    return {};
  }
  return std::thread([&fabric, n] {
    InprocTransport port(fabric, n, -1);
    Membership::request_join(port, "inproc://0", "", port.own_endpoint(), "", {kParams, ""});
    Membership::await_welcome(port, "inproc://0", Clock::now() + std::chrono::seconds(120), 120);
  });
}

int run(int argc, char** argv) {
  Flags flags("agreement_bench");
  flags.add_string("peers", "members of the first view", "64");
  flags.add_string("event", "crash, join or partition", "crash");
  flags.add_string("watchers", "crash: members told of it (0: all)", "3");
  flags.add_string("latency-ms", "one-way delay of every message", "0");
  flags.add_string("jitter-ms", "plus a uniform draw up to this", "0");
  flags.add_string("loss", "chance that a view-change message is lost", "0");
  flags.add_bool("help", "print this help");
  if (!flags.parse_flags_only(argc, argv)) return 0;
  const int n = static_cast<int>(flags.get_int("peers"));
  const std::string event = flags.get_string("event");
  const int watchers = static_cast<int>(flags.get_int("watchers"));
  LinkModel link;
  link.latency_s = flags.get_double("latency-ms") / 1e3;
  link.jitter_s = flags.get_double("jitter-ms") / 1e3;
  link.loss = flags.get_double("loss");
  if (n < 3 || (event != "crash" && event != "join" && event != "partition"))
    throw Error("agreement_bench", "needs --peers >= 3 and --event crash|join|partition");
  if (link.latency_s < 0 || link.jitter_s < 0 || !(link.loss >= 0 && link.loss < 1))
    throw Error("agreement_bench", "needs --latency-ms, --jitter-ms >= 0 and 0 <= --loss < 1");
  const double timeout_s = 300;
  InprocFabric fabric(n + 1);
  fabric.set_link(link);
  const View start = first_view(n);
  std::vector<std::unique_ptr<InprocTransport>> ports;
  for (int i = 0; i < n; ++i) ports.push_back(std::make_unique<InprocTransport>(fabric, i, i));
  const int victim = event == "crash" ? n / 3 : -1;
  std::vector<Outcome> outcome(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    if (i == victim) continue;
    threads.emplace_back([&, i] {
      try {
        outcome[i] = take_part(*ports[i], start, i, timeout_s);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200 + n));  // every member waiting
  const Clock::time_point t0 = Clock::now();
  const double cpu0 = cpu_seconds();
  std::thread joiner = start_event(event, n, watchers, fabric, ports);
  for (auto& t : threads) t.join();
  if (joiner.joinable()) joiner.join();
  const double cpu = cpu_seconds() - cpu0;
  double last = 0, messages = 0, bytes = 0, max_messages = 0;
  int members = 0, cut_off = 0;
  for (int i = 0; i < n; ++i) {
    if (i == victim) continue;
    if (!errors[i].empty()) throw Error("agreement_bench", errors[i]);
    last = std::max(last, std::chrono::duration<double>(outcome[i].done - t0).count());
    cut_off += outcome[i].cut_off;
    const TransportStats s = ports[i]->stats();
    messages += s.view_messages_sent;
    bytes += s.view_bytes_sent;
    max_messages = std::max(max_messages, double(s.view_messages_sent));
    ++members;
  }
  // The smaller half is cut off, at exactly half the one without id 0 (ranks n/2..): n/2 either way.
  if (cut_off != (event == "partition" ? n / 2 : 0))
    throw Error("agreement_bench", std::to_string(cut_off) + " members cut off, expected " +
                                       std::to_string(event == "partition" ? n / 2 : 0));
  std::string label = event;
  if (event == "crash") label += watchers <= 0 || watchers >= n - 1 ? " all" : " " + std::to_string(watchers);
  std::printf("| %5d | %-9s | %6.1f | %5.3f | %10.1f | %11.0f | %6.0f | %9.1f | %6llu | %6.1f |\n", n, label.c_str(),
              (link.latency_s + link.jitter_s / 2) * 1e3, link.loss, last * 1e3, messages / members, max_messages,
              bytes / members / 1e3, static_cast<unsigned long long>(fabric.lost()), cpu);
  return 0;
}

}  // namespace
}  // namespace gossip::peer

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, gossip::peer::run); }
