// gossip-topology: prints a graph's neighbours and weights per rank, ρ and the spectral gap, and
// simulates pure averaging, printing the consensus distance per round. --format json for scripts.
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "common/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "peer/config.h"
#include "topology/analysis.h"
#include "topology/topology.h"

namespace {

using namespace gossip;

std::string links_text(const std::vector<topology::Link>& links) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4);
  for (size_t i = 0; i < links.size(); ++i) out << (i ? " " : "") << links[i].peer << ":" << links[i].weight;
  return links.empty() ? "-" : out.str();
}

void print_json(const topology::Graph& graph, int n, const topology::Report& report, const std::vector<double>& xi) {
  const std::string name = topology::kind_name(graph.kind);
  std::cout << std::setprecision(17) << "{\"topology\": \"" << name << "\", \"n\": " << n
            << ", \"period\": " << report.period << ", \"rho_one_round\": " << report.rho_one_round
            << ", \"rho_period\": " << report.rho_period << ", \"spectral_gap\": " << report.gap
            << ", \"rounds\": [";
  for (int r = 0; r < report.period; ++r) {
    std::cout << (r ? ", " : "") << "{\"round\": " << r << ", \"ranks\": [";
    for (int i = 0; i < n; ++i) {
      topology::Neighbours nb = topology::neighbours(graph, n, i, r);
      std::cout << (i ? ", " : "") << "{\"rank\": " << i << ", \"self\": " << nb.self_weight
                << ", \"in\": " << topology::links_json(nb.in, 17) << ", \"out\": " << topology::links_json(nb.out, 17) << "}";
    }
    std::cout << "]}";
  }
  std::cout << "], \"consensus_distance\": [";
  for (size_t k = 0; k < xi.size(); ++k) std::cout << (k ? ", " : "") << xi[k];
  std::cout << "]}\n";
}

void print_text(const topology::Graph& graph, int n, const topology::Report& report, const std::vector<double>& xi,
                int dim) {
  const std::string name = topology::kind_name(graph.kind);
  // Random matchings never repeat: their "period" is the window of rounds analysed.
  const bool aperiodic = graph.kind == topology::Kind::kRandomMatching;
  std::cout << "topology " << name << ", n = " << n
            << (aperiodic ? ", new every round; the first " + std::to_string(report.period) + " rounds"
                          : ", period " + std::to_string(report.period))
            << "\n";
  for (int r = 0; r < report.period; ++r) {
    if (aperiodic) std::cout << "round " << r << "\n";
    else if (report.period > 1) std::cout << "round " << r << " (mod " << report.period << ")\n";
    std::cout << "rank  self    in (peer:weight)             out (peer:weight)\n";
    for (int i = 0; i < n; ++i) {
      topology::Neighbours nb = topology::neighbours(graph, n, i, r);
      std::cout << std::left << std::setw(6) << i << std::fixed << std::setprecision(4) << std::setw(8)
                << nb.self_weight << std::setw(29) << links_text(nb.in) << links_text(nb.out) << "\n";
    }
  }
  std::cout << std::right << std::setprecision(6) << "rho (one round)      " << report.rho_one_round << "\n";
  if (report.period > 1)
    std::cout << "rho (" << report.period << "-round product) " << report.rho_period << "\n";
  std::cout << "spectral gap         " << report.gap << " per round\n";
  std::cout << "pure averaging from random vectors (dim " << dim << "): consensus distance per round\n";
  std::cout << std::scientific << std::setprecision(4);
  for (size_t k = 0; k < xi.size(); ++k)
    std::cout << "round " << std::setw(3) << k << "  " << xi[k]
              << (k ? "  ratio " + [&] {
                   std::ostringstream o;
                   o << std::fixed << std::setprecision(4) << (xi[k - 1] > 0 ? xi[k] / xi[k - 1] : 0.0);
                   return o.str();
                 }()
                    : "")
              << "\n";
}

int run(int argc, char** argv) {
  Flags flags("gossip-topology");
  flags.add_string("topology", "graph: " + [] {
    std::string s;
    for (auto& k : topology::kind_names()) s += (s.empty() ? "" : ", ") + k;
    return s;
  }(), "ring");
  flags.add_string("n", "number of peers", "8");
  flags.add_string("config", "take topology and peer count from a run YAML (overrides --topology/--n)", std::nullopt);
  flags.add_string("rows", "torus rows (0 = most square)", "0");
  flags.add_string("rounds", "rounds of simulated pure averaging", "10");
  flags.add_string("dim", "floats per peer in the simulation", "32");
  flags.add_string("seed", "seed of the simulation's random start and of random matchings (a config's: its own)", "1");
  flags.add_string("format", "text or json", "text");
  flags.add_bool("help", "print this help");
  flags.parse(argc, argv);
  if (flags.get_bool("help")) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  // A flag's integer in [lo, hi], checked before it narrows (--n 4294967297 is not 1).
  auto bounded = [&](const char* name, int64_t lo, int64_t hi) {
    const int64_t v = flags.get_int(name);
    if (v < lo || v > hi)
      throw Error("gossip-topology", "--" + std::string(name) + " must be in " + std::to_string(lo) + ".." +
                                         std::to_string(hi) + ", got " + std::to_string(v));
    return static_cast<int>(v);
  };
  topology::Graph graph;
  int n;
  if (flags.has("config")) {
    peer::RunConfig cfg = peer::load_config(flags.get_string("config"));
    graph = cfg.topology;
    n = cfg.peers.count();
  } else {
    graph.kind = topology::parse_kind(flags.get_string("topology"));
    graph.torus_rows = bounded("rows", 0, 4096);
    graph.seed = static_cast<uint64_t>(flags.get_int("seed"));
    n = bounded("n", 1, 4096);
    if (graph.kind == topology::Kind::kEdgeList)
      throw Error("gossip-topology", "edge_list needs --config with a topology.edges list");
  }
  const int rounds = bounded("rounds", 0, 1000000), dim = bounded("dim", 1, 1000000);
  // The simulation holds 2·n·dim doubles and costs about rounds·n·dim·degree.
  if (int64_t(n) * dim > (int64_t(1) << 25))
    throw Error("gossip-topology", "--n × --dim must be at most 33554432 (the simulation's 2·n·dim doubles), got " +
                                       std::to_string(int64_t(n) * dim));
  if (double(rounds) * n * dim > 2e9)
    throw Error("gossip-topology", "--rounds × --n × --dim must be at most 2e9 (the simulation's work), got " +
                                       number_text(double(rounds) * n * dim));
  const std::string format = flags.get_string("format");
  if (format != "text" && format != "json") throw Error("gossip-topology", "--format must be text or json");

  const topology::Report report = topology::analyse(graph, n);
  const std::vector<double> xi = topology::simulate_consensus(graph, n, rounds, dim, flags.get_int("seed"));
  if (format == "json") print_json(graph, n, report, xi);
  else print_text(graph, n, report, xi, dim);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
