#include "topology/topology.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/random.h"

namespace gossip::topology {
namespace {

struct Entry {
  const char* name;
  Kind kind;
};
constexpr Entry kKinds[] = {
    {"ring", Kind::kRing},
    {"exponential", Kind::kExponential},
    {"one_peer_exponential", Kind::kOnePeerExponential},
    {"complete", Kind::kComplete},
    {"torus", Kind::kTorus},
    {"edge_list", Kind::kEdgeList},
    {"push_sum_one_peer_exponential", Kind::kPushSumOnePeerExponential},
    {"random_matching", Kind::kRandomMatching},
};

int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// Collects weights per peer, merging duplicates (e.g. i+1 == i−1 when n = 2) and folding the
// rank itself into the self weight.
class Accumulator {
 public:
  explicit Accumulator(int rank) : rank_(rank) {}
  void add(int peer, double w) {
    if (peer == rank_) self_ += w;
    else weights_[peer] += w;
  }
  void add_self(double w) { self_ += w; }
  double self() const { return self_; }
  std::vector<Link> links() const {
    std::vector<Link> out;
    for (auto [p, w] : weights_) out.push_back({p, w});
    return out;
  }

 private:
  int rank_;
  double self_ = 0;
  std::map<int, double> weights_;
};

// Circulant graphs: rank receives from rank−o and sends to rank+o with weight w for each (o, w).
Neighbours circulant(int n, int rank, double self_weight, const std::vector<std::pair<int, double>>& offsets) {
  Accumulator in(rank), out(rank);
  in.add_self(self_weight);
  out.add_self(self_weight);
  for (auto [o, w] : offsets) {
    in.add(mod(int64_t(rank) - o, n), w);
    out.add(mod(int64_t(rank) + o, n), w);
  }
  return {in.self(), in.links(), out.links()};
}

Neighbours torus(const Graph& g, int n, int rank) {
  auto [rows, cols] = torus_shape(g, n);
  const int r = rank / cols, c = rank % cols;
  Accumulator acc(rank);
  acc.add_self(0.2);
  acc.add(mod(r - 1, rows) * cols + c, 0.2);
  acc.add(mod(r + 1, rows) * cols + c, 0.2);
  acc.add(r * cols + mod(c - 1, cols), 0.2);
  acc.add(r * cols + mod(c + 1, cols), 0.2);
  auto links = acc.links();
  return {acc.self(), links, links};
}

Neighbours random_matching(const Graph& g, int n, int rank, int64_t round) {
  if (n == 1) return {1.0, {}, {}};
  const std::vector<int> p = matching_order(g.seed, round, n);
  const int pos = static_cast<int>(std::find(p.begin(), p.end(), rank) - p.begin());
  Accumulator acc(rank);
  if (n % 2 == 1 && pos >= n - 3) {  // the triangle
    acc.add_self(1.0 / 3);
    for (int k = n - 3; k < n; ++k)
      if (k != pos) acc.add(p[k], 1.0 / 3);
  } else {
    acc.add_self(0.5);
    acc.add(p[pos ^ 1], 0.5);
  }
  auto links = acc.links();
  return {acc.self(), links, links};
}

Neighbours metropolis(const Graph& g, int n, int rank) {
  validate_edge_list(g.edges, n);
  std::vector<std::vector<int>> adj(n);
  for (auto [a, b] : g.edges) {
    adj[a].push_back(b);
    adj[b].push_back(a);
  }
  for (auto& a : adj) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }
  // W_ij = 1 / (1 + max(d_i, d_j)) on edges, self weight takes the rest: symmetric and
  // doubly stochastic for any connected graph.
  Accumulator acc(rank);
  double sum = 0;
  for (int j : adj[rank]) {
    const double w = 1.0 / (1.0 + std::max(adj[rank].size(), adj[j].size()));
    acc.add(j, w);
    sum += w;
  }
  acc.add_self(1.0 - sum);
  auto links = acc.links();
  return {acc.self(), links, links};
}

}  // namespace

Kind parse_kind(const std::string& name) {
  for (const Entry& e : kKinds)
    if (name == e.name) return e.kind;
  std::string valid;
  for (const Entry& e : kKinds) valid += (valid.empty() ? "" : ", ") + std::string(e.name);
  throw Error("topology", "unknown topology '" + name + "' (valid: " + valid + ")");
}

std::string kind_name(Kind kind) {
  for (const Entry& e : kKinds)
    if (e.kind == kind) return e.name;
  return "?";
}

std::vector<std::string> kind_names() {
  std::vector<std::string> out;
  for (const Entry& e : kKinds) out.push_back(e.name);
  return out;
}

int tau(int n) {
  int t = 0;
  while ((int64_t(1) << t) < n) ++t;
  return t;
}

int period(const Graph& graph, int n) {
  const bool one_peer = graph.kind == Kind::kOnePeerExponential || graph.kind == Kind::kPushSumOnePeerExponential ||
                        graph.kind == Kind::kRandomMatching;
  return one_peer ? std::max(1, tau(n)) : 1;
}

bool is_directed(Kind kind) { return kind == Kind::kPushSumOnePeerExponential; }

std::pair<int, int> torus_shape(const Graph& graph, int n) {
  int rows = graph.torus_rows;
  if (rows == 0) {
    rows = 1;
    for (int r = 1; r * r <= n; ++r)
      if (n % r == 0) rows = r;
  }
  if (rows <= 0 || n % rows != 0)
    throw Error("topology torus", "rows = " + std::to_string(rows) + " does not divide n = " + std::to_string(n));
  return {rows, n / rows};
}

Neighbours neighbours(const Graph& graph, int n, int rank, int64_t round) {
  if (n < 1) throw Error("topology " + kind_name(graph.kind), "n must be at least 1, got " + std::to_string(n));
  if (rank < 0 || rank >= n)
    throw Error("topology " + kind_name(graph.kind),
                "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(n - 1));
  if (round < 0) throw Error("topology " + kind_name(graph.kind), "round must be >= 0");
  const int t = tau(n);
  switch (graph.kind) {
    case Kind::kRing:
      if (n == 1) return {1.0, {}, {}};
      return circulant(n, rank, 1.0 / 3, {{1, 1.0 / 3}, {-1, 1.0 / 3}});
    case Kind::kExponential: {
      std::vector<std::pair<int, double>> offsets;
      for (int k = 0; k < t; ++k) offsets.push_back({1 << k, 1.0 / (t + 1)});
      return circulant(n, rank, 1.0 / (t + 1), offsets);
    }
    case Kind::kOnePeerExponential:
    case Kind::kPushSumOnePeerExponential:
      if (n == 1) return {1.0, {}, {}};
      return circulant(n, rank, 0.5, {{1 << static_cast<int>(round % t), 0.5}});
    case Kind::kComplete: {
      std::vector<std::pair<int, double>> offsets;
      for (int o = 1; o < n; ++o) offsets.push_back({o, 1.0 / n});
      return circulant(n, rank, 1.0 / n, offsets);
    }
    case Kind::kTorus:
      return torus(graph, n, rank);
    case Kind::kEdgeList:
      return metropolis(graph, n, rank);
    case Kind::kRandomMatching:
      return random_matching(graph, n, rank, round);
  }
  throw Error("topology", "unhandled kind");
}

std::vector<int> matching_order(uint64_t seed, int64_t round, int n) {
  std::vector<int> p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  uint64_t state = seed;
  state = splitmix64(state) ^ static_cast<uint64_t>(round);
  for (int i = n - 1; i > 0; --i) {  // Fisher–Yates (the modulo's bias is below 2^-40 for n < 2^24)
    const int j = static_cast<int>(splitmix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

void validate_edge_list(const std::vector<std::pair<int, int>>& edges, int n) {
  std::vector<std::vector<int>> adj(n);
  for (size_t e = 0; e < edges.size(); ++e) {
    auto [a, b] = edges[e];
    const std::string where = "topology edge_list edge " + std::to_string(e) + " [" + std::to_string(a) + ", " +
                              std::to_string(b) + "]";
    if (a < 0 || a >= n || b < 0 || b >= n)
      throw Error(where, "peer id outside 0.." + std::to_string(n - 1));
    if (a == b) throw Error(where, "self loop");
    adj[a].push_back(b);
    adj[b].push_back(a);
  }
  std::vector<bool> seen(n, false);
  std::vector<int> stack{0};
  seen[0] = true;
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    for (int u : adj[v])
      if (!seen[u]) seen[u] = true, stack.push_back(u);
  }
  for (int v = 0; v < n; ++v)
    if (!seen[v]) throw Error("topology edge_list", "graph is disconnected: peer " + std::to_string(v) +
                                                        " cannot be reached from peer 0");
}

std::string links_json(const std::vector<Link>& links, int precision) {
  std::ostringstream out;
  out << std::setprecision(precision) << "[";
  for (size_t i = 0; i < links.size(); ++i)
    out << (i ? ", " : "") << "{\"peer\": " << links[i].peer << ", \"weight\": " << links[i].weight << "}";
  return out.str() + "]";
}

}  // namespace gossip::topology
