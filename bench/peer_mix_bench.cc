// The C++ twin of bench/python_mix.py: one library peer (gossip::Peer, started by gossip-launch
// CONFIG -- peer_mix_bench FLOATS ROUNDS) mixing a buffer of FLOATS floats; prints the seconds per
// mix() over the timed rounds, between two collective barriers. bench/python_mix.sh runs it beside
// the Python peer, so the ratio isolates what Python adds.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "gossip/peer.h"

namespace {

int run(int argc, char** argv) {
  const std::string usage = "usage: gossip-launch CONFIG -- peer_mix_bench FLOATS ROUNDS\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(usage.c_str(), stdout);
    return 0;
  }
  if (argc != 3 || std::string(argv[1]).find_first_not_of("0123456789") != std::string::npos ||
      std::string(argv[2]).find_first_not_of("0123456789") != std::string::npos)
    throw gossip::Error("peer_mix_bench", "expected two counts\n" + usage);
  const size_t floats = std::stoul(argv[1]);
  const int rounds = std::stoi(argv[2]);
  gossip::PeerOptions o = gossip::PeerOptions::from_environment();
  o.steps = 3 + rounds;
  std::vector<float> x(floats, 1.0f + 0.01f * float(o.rank));  // alike, as models are: no outliers
  gossip::Peer peer(o, x);
  for (int k = 0; k < 3; ++k) peer.mix(k, x);  // warm-up: connections, page faults
  peer.consensus(x);                           // a barrier
  const auto start = std::chrono::steady_clock::now();
  for (int k = 3; k < 3 + rounds; ++k) peer.mix(k, x);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / rounds;
  peer.consensus(x);  // nobody leaves while a neighbour still needs its messages
  std::printf("peer_mix rank %d seconds_per_round %.6f\n", peer.rank(), secs);
  peer.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
