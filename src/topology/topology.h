// Communication graphs as pure functions: neighbours(graph, n, rank, round) returns the weights a
// peer mixes with, self weight included. Static graphs ignore `round`; time-varying graphs rotate
// with it. No I/O and no hidden state. Convention: the mixing step is
//     x_rank ← self_weight·x_rank + Σ_{l ∈ in} l.weight·x_{l.peer}
// and `out` lists the peers that read x_rank, with the weight each of them applies (column `rank`
// of W), so in == out for symmetric graphs and Σ out.weight + self_weight = 1 for column-stochastic
// (push-sum) graphs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gossip::topology {

enum class Kind {
  kRing,                  // i±1, 1/3 each
  kExponential,           // static: i+2^k for k < τ, 1/(τ+1) each
  kOnePeerExponential,    // round k: ½ self, ½ with i+2^(k mod τ)
  kComplete,              // 1/n each
  kTorus,                 // 2-D torus, 4 neighbours, 1/5 each
  kEdgeList,              // undirected graph from an edge list, Metropolis–Hastings weights
  kPushSumOnePeerExponential,  // SGP's directed graph: round k send ½ to i+2^(k mod τ)
  kRandomMatching,        // round k: a random perfect matching from (seed, k), ½ with the partner;
                          // odd n: the last three of the shuffle average as a triangle, 1/3 each
};

struct Link {
  int peer;
  double weight;
};

struct Neighbours {
  double self_weight = 1.0;
  std::vector<Link> in;   // peers whose x I mix in, ascending peer id, no duplicates, no self
  std::vector<Link> out;  // peers that mix my x in, ascending peer id, no duplicates, no self
};

struct Graph {
  Kind kind = Kind::kRing;
  int torus_rows = 0;                     // kTorus: rows (0 = most square factorisation of n)
  std::vector<std::pair<int, int>> edges;  // kEdgeList: undirected edges between peer ids
  uint64_t seed = 0;                      // kRandomMatching: shared by all peers (the run's seed)
};

// Parses "ring", "exponential", "one_peer_exponential", "complete", "torus", "edge_list",
// "push_sum_one_peer_exponential"; throws gossip::Error listing the valid names otherwise.
Kind parse_kind(const std::string& name);
std::string kind_name(Kind kind);
// [{"peer": P, "weight": W}, ...] with weights printed to `precision` significant digits.
std::string links_json(const std::vector<Link>& links, int precision);
std::vector<std::string> kind_names();

// ⌈log2 n⌉ (0 for n = 1).
int tau(int n);
// Number of rounds after which a time-varying graph repeats (1 for static graphs). Random
// matchings never repeat: for them it is the window the analysis looks at, max(1, τ) rounds.
int period(const Graph& graph, int n);
// True for graphs whose W is only column-stochastic by construction (meant for push-sum).
bool is_directed(Kind kind);
// Rows × columns used for a torus of n peers.
std::pair<int, int> torus_shape(const Graph& graph, int n);

// Throws gossip::Error for n < 1, rank outside [0, n) or an invalid edge list for this n.
Neighbours neighbours(const Graph& graph, int n, int rank, int64_t round);

// Round `round`'s shuffle of 0..n−1 for kRandomMatching: (p[0], p[1]), (p[2], p[3]), ... are
// matched; for odd n the last three form a triangle. The same on every peer (seed, round, n).
std::vector<int> matching_order(uint64_t seed, int64_t round, int n);

// Checks an edge list: ids in [0, n), no self loops, connected. Throws gossip::Error naming the
// offending edge or the unreachable peer.
void validate_edge_list(const std::vector<std::pair<int, int>>& edges, int n);

}  // namespace gossip::topology
