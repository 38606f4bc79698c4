// Time of one exchange round between n peer processes on this machine over the real ZeroMQ
// transport: gossip (ring, one-peer exponential, ...), push-sum, or the peers' own ring
// all-reduce. Forks the n peers itself; prints "<algo> n <n> floats <f> seconds_per_round <s>"
// (the slowest peer's mean over the timed rounds).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/flags.h"
#include "algorithms/collectives.h"
#include "algorithms/gossip_step.h"
#include "algorithms/push_sum_step.h"
#include "kernels/cpu_backend.h"
#include "transport/zmq/zmq_transport.h"

using namespace gossip;

namespace {

double run_peer(int rank, int n, size_t floats, const std::string& algo, int rounds, const std::string& dir,
                const std::string& scheme, size_t chunk_floats, double timeout, double max_norm_ratio,
                peer::Dtype wire, bool single_copy, bool checksum_always) {
  peer::ZmqTransportOptions o;
  o.rank = rank;
  for (int i = 0; i < n; ++i)
    o.endpoints.push_back(scheme == "ipc" ? "ipc://" + dir + "/ep-" + std::to_string(i) : "tcp://127.0.0.1:0");
  o.rendezvous_dir = dir;
  o.chunk_bytes = chunk_floats * 4;
  o.single_copy = single_copy;
  o.checksum_always = checksum_always;
  peer::ZmqTransport t(o);
  // With single copy the gossip buffers are shared regions, as a peer's parameters are
  // (DecentralizedHook::make_spare): the neighbours fold them in place.
  kernels::CpuBackend cpu;
  auto buffer = [&](float value) {
    auto a = single_copy ? kernels::DeviceArray<float>::shared(cpu, floats) : kernels::DeviceArray<float>(cpu, floats);
    std::fill(a.get(), a.get() + floats, value);
    return a;
  };
  kernels::DeviceArray<float> x = buffer(1.0f + 0.01f * float(rank)), y = buffer(0);  // alike, as models are: no outliers
  peer::RingAllReduce ar(t, chunk_floats, timeout);
  std::optional<peer::GossipStep> gossip;
  std::optional<peer::PushSumStep> push;
  if (algo == "push_sum") {
    push.emplace(t, topology::Graph{topology::Kind::kPushSumOnePeerExponential, 0, {}}, floats, chunk_floats, timeout, false, 0,
                 wire);
    push->init(x.get());
  } else if (algo != "allreduce") {
    gossip.emplace(t, topology::Graph{topology::parse_kind(algo), 0, {}}, floats, chunk_floats, timeout, max_norm_ratio,
                   wire);
  }
  auto round = [&](int k) {
    if (gossip) {
      gossip->step(k, x.get(), y.get());
      std::swap(x, y);
    }
    else if (push) push->step(k, x.get());
    else ar.sum(x.get(), x.size());
  };
  for (int k = 0; k < 3; ++k) round(k);  // warm-up: connections, page faults
  float barrier = 0;
  ar.sum(&barrier, 1);
  const auto start = std::chrono::steady_clock::now();
  for (int k = 3; k < 3 + rounds; ++k) round(k);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / rounds;
  ar.sum(&barrier, 1);  // nobody leaves while a neighbour still needs its messages
  return secs;
}

}  // namespace

int run(int argc, char** argv) {
  Flags flags("exchange_bench");
  flags.add_string("n", "peers", "4");
  flags.add_string("floats", "floats in the exchanged buffer", "4194304");
  flags.add_string("algo", "ring, one_peer_exponential, exponential, push_sum or allreduce", "ring");
  flags.add_string("rounds", "timed rounds", "10");
  flags.add_string("transport", "tcp or ipc", "tcp");
  flags.add_string("chunk_bytes", "payload frame size (algorithm.chunk_bytes: gossip-peer's default)",
                   std::to_string(peer::kChunkBytes));
  flags.add_string("timeout", "seconds a peer waits for a neighbour", "60");
  flags.add_string("max_norm_ratio", "gossip outlier screen, as algorithm.max_norm_ratio (gossip-peer's default)", "10");
  flags.add_string("wire", "gossip and push-sum values on the wire: f32 or bf16 (algorithm.wire)", "f32");
  flags.add_bool("single_copy", "peers copy each other's chunks out of the sender's memory (algorithm.single_copy)");
  flags.add_string("checksum", "payload checksums: auto (none over loopback and ipc://) or always (algorithm.checksum)",
                   "auto");
  flags.add_bool("help", "print this help");
  if (!flags.parse_flags_only(argc, argv)) return 0;
  peer::tune_allocator_for_large_messages();
  const int n = static_cast<int>(flags.get_int("n"));
  const size_t floats = static_cast<size_t>(flags.get_int("floats"));
  const std::string algo = flags.get_string("algo");
  const std::string wire = flags.get_string("wire");
  if (wire != "f32" && wire != "bf16") throw Error("exchange_bench", "--wire must be f32 or bf16, not '" + wire + "'");
  const std::string checksum = flags.get_string("checksum");
  if (checksum != "auto" && checksum != "always")
    throw Error("exchange_bench", "--checksum must be auto or always, not '" + checksum + "'");
  char tmpl[] = "/tmp/gossip-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe(p) != 0) return 1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      double s = -1;
      try {
        s = run_peer(r, n, floats, algo, static_cast<int>(flags.get_int("rounds")), dir, flags.get_string("transport"),
                     static_cast<size_t>(flags.get_int("chunk_bytes")) / 4, flags.get_double("timeout"),
                     flags.get_double("max_norm_ratio"), wire == "bf16" ? peer::Dtype::kBf16 : peer::Dtype::kF32, flags.get_bool("single_copy"), checksum == "always");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "peer %d: %s\n", r, e.what());
      }
      [[maybe_unused]] auto w = ::write(p[1], &s, sizeof(s));
      ::_exit(s < 0 ? 1 : 0);
    }
    ::close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  double worst = 0;
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    double s = -1;
    if (::read(fds[r], &s, sizeof(s)) != sizeof(s) || s < 0) ok = false;
    worst = std::max(worst, s);
    int status;
    ::waitpid(pids[r], &status, 0);
  }
  std::filesystem::remove_all(dir);
  if (!ok) return 1;
  std::printf("%s n %d floats %zu seconds_per_round %.6f\n", algo.c_str(), n, floats, worst);
  return 0;
}

int main(int argc, char** argv) { return guarded_main(argc, argv, run); }
