// The view-change agreement at size, simulated: N members, one thread each, run the real
// membership code (Membership::agree over ViewTransport) over the in-process transport (no
// latency, no loss: every message arrives at once), for one event, and print how long until every
// member had the new view and how many view-change messages and bytes each member sent.
//   agreement_bench --peers N --event crash|join [--watchers W]
// crash: member N/3 stops (nothing to or from it arrives) and only its W watchers are told (the
// failure detector's steady state; W = 0: every member is told, as by an all-to-all detector).
// join: a new peer asks member 0.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
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

// Takes part in view changes until this member's view reaches epoch 1; returns when it did.
Clock::time_point take_part(MembershipPort& port, const View& start, int id, double timeout_s) {
  ViewTransport view(port, start, id);
  view.set_view(start, id);
  Membership membership(port, view, timeout_s, kParams);
  const auto deadline = Clock::now() + std::chrono::duration<double>(2 * timeout_s);
  while (view.view().epoch < 1) {
    if (Clock::now() > deadline) throw Error("member " + std::to_string(id), "no view change settled");
    if (!membership.pending()) {  // (a training peer waits in a receive that a proposal interrupts)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    std::optional<ViewChange> change = membership.agree(kRound);
    if (change && change->cut_off) throw Error("member " + std::to_string(id), *change->cut_off);
    if (change)
      for (const JoinRequest& j : change->welcome) membership.send_welcome(*change, j, 100);
  }
  return Clock::now();
}

int run(int argc, char** argv) {
  Flags flags("agreement_bench");
  flags.add_string("peers", "members of the first view", "64");
  flags.add_string("event", "crash or join", "crash");
  flags.add_string("watchers", "crash: members told of it (0: all)", "3");
  flags.add_bool("help", "print this help");
  if (!flags.parse_flags_only(argc, argv)) return 0;
  const int n = static_cast<int>(flags.get_int("peers"));
  const std::string event = flags.get_string("event");
  const int watchers = static_cast<int>(flags.get_int("watchers"));
  if (n < 3 || (event != "crash" && event != "join")) throw Error("agreement_bench", "needs --peers >= 3 and --event crash|join");
  const double timeout_s = 120;
  InprocFabric fabric(n + 1);
  const View start = first_view(n);
  std::vector<std::unique_ptr<InprocTransport>> ports;
  for (int i = 0; i < n; ++i) ports.push_back(std::make_unique<InprocTransport>(fabric, i, i));
  const int victim = n / 3;
  std::vector<Clock::time_point> done(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    if (event == "crash" && i == victim) continue;
    threads.emplace_back([&, i] {
      try {
        done[i] = take_part(*ports[i], start, i, timeout_s);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every member waiting
  const Clock::time_point t0 = Clock::now();
  std::thread joiner;
  if (event == "crash") {
    fabric.set_reachable(victim, false);
    const int told = watchers <= 0 || watchers >= n - 1 ? n - 1 : watchers;
    for (int d = 1; d <= told; ++d) ports[(victim + d) % n]->suspect(victim);
  } else {
    joiner = std::thread([&] {
      InprocTransport port(fabric, n, -1);
      Membership::request_join(port, "inproc://0", "", port.own_endpoint(), "", kParams);
      Membership::await_welcome(port, "inproc://0", Clock::now() + std::chrono::seconds(60), 60);
    });
  }
  for (auto& t : threads) t.join();
  if (joiner.joinable()) joiner.join();
  double last = 0, messages = 0, bytes = 0, max_messages = 0;
  int members = 0;
  for (int i = 0; i < n; ++i) {
    if (event == "crash" && i == victim) continue;
    if (!errors[i].empty()) throw Error("agreement_bench", errors[i]);
    last = std::max(last, std::chrono::duration<double>(done[i] - t0).count());
    const TransportStats s = ports[i]->stats();
    messages += s.view_messages_sent;
    bytes += s.view_bytes_sent;
    max_messages = std::max(max_messages, double(s.view_messages_sent));
    ++members;
  }
  std::printf("| %5d | %-5s | %8d | %10.1f | %12.0f | %8.0f | %10.1f |\n", n, event.c_str(),
              event == "crash" ? (watchers <= 0 ? n - 1 : std::min(watchers, n - 1)) : 0, last * 1e3,
              messages / members, max_messages, bytes / members / 1e3);
  return 0;
}

}  // namespace
}  // namespace gossip::peer

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, gossip::peer::run); }
