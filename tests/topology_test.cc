#include "topology/topology.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.h"
#include "topology/analysis.h"

namespace gossip::topology {
namespace {

Graph graph_of(Kind k) { return Graph{k, 0, {}}; }

double row_sum(const Matrix& w, int i) {
  double s = 0;
  for (int j = 0; j < w.n; ++j) s += w.at(i, j);
  return s;
}
double col_sum(const Matrix& w, int j) {
  double s = 0;
  for (int i = 0; i < w.n; ++i) s += w.at(i, j);
  return s;
}

// in and out lists must describe the same matrix: out of rank r = column r of W.
void expect_out_is_column(const Graph& g, int n, int64_t round) {
  Matrix w = mixing_matrix(g, n, round);
  for (int r = 0; r < n; ++r) {
    Neighbours nb = neighbours(g, n, r, round);
    double sum = nb.self_weight;
    for (const Link& l : nb.out) {
      EXPECT_NEAR(l.weight, w.at(l.peer, r), 1e-15);
      EXPECT_NE(l.peer, r);
      sum += l.weight;
    }
    EXPECT_NEAR(sum, col_sum(w, r), 1e-12);
  }
}

struct Case {
  Kind kind;
  bool symmetric;
};

class SymmetricGraphs : public ::testing::TestWithParam<Kind> {};

TEST_P(SymmetricGraphs, DoublyStochasticAndSymmetricForN1To32) {
  for (int n = 1; n <= 32; ++n) {
    Graph g = graph_of(GetParam());
    Matrix w = mixing_matrix(g, n, 0);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(row_sum(w, i), 1.0, 1e-12) << n;
      EXPECT_NEAR(col_sum(w, i), 1.0, 1e-12) << n;
      for (int j = 0; j < n; ++j) {
        EXPECT_GE(w.at(i, j), 0.0);
        EXPECT_NEAR(w.at(i, j), w.at(j, i), 1e-15) << "n=" << n << " " << i << "," << j;
      }
    }
    expect_out_is_column(g, n, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, SymmetricGraphs, ::testing::Values(Kind::kRing, Kind::kComplete, Kind::kTorus));

class DoublyStochasticGraphs : public ::testing::TestWithParam<Kind> {};

TEST_P(DoublyStochasticGraphs, RowsAndColumnsSumToOneEveryRound) {
  for (int n = 1; n <= 32; ++n)
    for (int64_t round = 0; round < 6; ++round) {
      Graph g = graph_of(GetParam());
      Matrix w = mixing_matrix(g, n, round);
      for (int i = 0; i < n; ++i) {
        EXPECT_NEAR(row_sum(w, i), 1.0, 1e-12) << n;
        EXPECT_NEAR(col_sum(w, i), 1.0, 1e-12) << n;
      }
      expect_out_is_column(g, n, round);
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, DoublyStochasticGraphs,
                         ::testing::Values(Kind::kExponential, Kind::kOnePeerExponential, Kind::kRandomMatching));

// Every round of a random matching pairs the peers (½/½, symmetric); for odd n the last three of
// the shuffle average as a triangle (1/3 each) and nobody is left out.
TEST(RandomMatching, EveryRoundAPerfectMatchingOrOneTriangle) {
  for (int n = 1; n <= 33; ++n)
    for (int64_t round = 0; round < 20; ++round) {
      const Graph g{Kind::kRandomMatching, 0, {}, 7};
      const Matrix w = mixing_matrix(g, n, round);
      int in_triangle = 0;
      for (int r = 0; r < n; ++r) {
        const Neighbours nb = neighbours(g, n, r, round);
        for (int j = 0; j < n; ++j) ASSERT_NEAR(w.at(r, j), w.at(j, r), 1e-15) << n << " " << round;
        if (n == 1) {
          EXPECT_TRUE(nb.in.empty());
        } else if (nb.in.size() == 2) {
          ++in_triangle;
          EXPECT_NEAR(nb.self_weight, 1.0 / 3, 1e-15);
        } else {
          ASSERT_EQ(nb.in.size(), 1u) << "n " << n << " rank " << r << " round " << round;
          EXPECT_EQ(nb.self_weight, 0.5);
          EXPECT_EQ(nb.in[0].weight, 0.5);
        }
      }
      EXPECT_EQ(in_triangle, n % 2 == 1 && n > 1 ? 3 : 0) << "n " << n << " round " << round;
    }
}

// The matching is a pure function of (seed, round, n): the same on every call (every peer), new
// every round and for every seed, and over many rounds each partner equally likely.
TEST(RandomMatching, DrawnFromTheSharedSeedAndTheRound) {
  const int n = 8;
  const Graph a{Kind::kRandomMatching, 0, {}, 1}, b{Kind::kRandomMatching, 0, {}, 2};
  EXPECT_EQ(matching_order(1, 5, n), matching_order(1, 5, n));
  int differs_by_round = 0, differs_by_seed = 0;
  for (int64_t round = 0; round < 10; ++round) {
    differs_by_round += neighbours(a, n, 0, round).in[0].peer != neighbours(a, n, 0, round + 1).in[0].peer;
    differs_by_seed += neighbours(a, n, 0, round).in[0].peer != neighbours(b, n, 0, round).in[0].peer;
  }
  EXPECT_GE(differs_by_round, 5);
  EXPECT_GE(differs_by_seed, 5);
  std::vector<int> partner(n, 0);
  const int rounds = 70000;
  for (int64_t round = 0; round < rounds; ++round) ++partner[neighbours(a, n, 0, round).in[0].peer];
  EXPECT_EQ(partner[0], 0);
  for (int p = 1; p < n; ++p) EXPECT_NEAR(partner[p], rounds / 7.0, 0.03 * rounds / 7.0) << p;
}

// Pure averaging: a random matching halves Ξ per round in expectation, far faster than a ring.
TEST(RandomMatching, AveragesFasterThanARing) {
  const int n = 16, rounds = 10;
  const std::vector<double> matching = simulate_consensus(Graph{Kind::kRandomMatching, 0, {}, 3}, n, rounds, 64, 1);
  const std::vector<double> ring = simulate_consensus(graph_of(Kind::kRing), n, rounds, 64, 1);
  EXPECT_LT(matching[rounds], 0.01 * matching[0]);
  EXPECT_LT(matching[rounds], 0.1 * ring[rounds]);
}

TEST(PushSumGraph, ColumnStochasticForN1To32) {
  Graph g = graph_of(Kind::kPushSumOnePeerExponential);
  for (int n = 1; n <= 32; ++n)
    for (int64_t round = 0; round < 6; ++round) {
      Matrix w = mixing_matrix(g, n, round);
      for (int j = 0; j < n; ++j) EXPECT_NEAR(col_sum(w, j), 1.0, 1e-12);
      expect_out_is_column(g, n, round);
      // Each peer pushes to exactly one other peer (or keeps everything when alone).
      EXPECT_EQ(neighbours(g, n, 0, round).out.size(), n == 1 ? 0u : 1u);
    }
}

TEST(Ring, RhoMatchesClosedForm) {
  for (int n = 2; n <= 32; ++n) {
    const double expected = std::abs((1 + 2 * std::cos(2 * M_PI / n)) / 3);
    EXPECT_NEAR(rho(mixing_matrix(graph_of(Kind::kRing), n, 0)), expected, 1e-9) << n;
  }
  EXPECT_NEAR(rho(mixing_matrix(graph_of(Kind::kRing), 1, 0)), 0.0, 1e-12);
}

TEST(StaticExponential, RhoClosedFormForEvenNSmallerForOdd) {
  for (int n = 2; n <= 32; ++n) {
    const int t = tau(n);
    const double bound = 1 - 2.0 / (1 + t);
    const double r = rho(mixing_matrix(graph_of(Kind::kExponential), n, 0));
    if (n % 2 == 0) EXPECT_NEAR(r, bound, 1e-9) << n;
    else EXPECT_LT(r, bound - 1e-9) << n;
  }
}

TEST(StaticExponential, NeighboursArePowersOfTwo) {
  Neighbours nb = neighbours(graph_of(Kind::kExponential), 8, 0, 0);
  ASSERT_EQ(nb.out.size(), 3u);
  EXPECT_EQ(nb.out[0].peer, 1);
  EXPECT_EQ(nb.out[1].peer, 2);
  EXPECT_EQ(nb.out[2].peer, 4);
  EXPECT_DOUBLE_EQ(nb.self_weight, 0.25);
}

TEST(OnePeerExponential, ProductOfTauRoundsIsExactAverageForPowersOfTwo) {
  for (int n : {1, 2, 4, 8, 16, 32}) {
    const int t = tau(n);
    for (int64_t start = 0; start < 2 * std::max(t, 1); ++start) {
      Matrix p = mixing_product(graph_of(Kind::kOnePeerExponential), n, start, std::max(t, 1));
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) ASSERT_NEAR(p.at(i, j), 1.0 / n, 1e-12) << n << " from " << start;
    }
  }
}

TEST(OnePeerExponential, NotExactForOtherN) {
  Matrix p = mixing_product(graph_of(Kind::kOnePeerExponential), 6, 0, tau(6));
  EXPECT_GT(rho(p), 1e-3);
}

// Random connected graphs (a spanning path plus random chords) get doubly stochastic
// Metropolis–Hastings weights.
TEST(EdgeList, MetropolisDoublyStochasticOnRandomConnectedGraphs) {
  std::mt19937_64 rng(11);
  for (int n = 1; n <= 32; ++n) {
    Graph g{Kind::kEdgeList, 0, {}};
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 1; i < n; ++i) g.edges.push_back({order[i - 1], order[i]});
    for (int e = 0; e < n; ++e) {
      int a = rng() % n, b = rng() % n;
      if (a != b) g.edges.push_back({a, b});
    }
    Matrix w = mixing_matrix(g, n, 0);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(row_sum(w, i), 1.0, 1e-12);
      EXPECT_NEAR(col_sum(w, i), 1.0, 1e-12);
      for (int j = 0; j < n; ++j) {
        EXPECT_GE(w.at(i, j), 0.0);
        EXPECT_NEAR(w.at(i, j), w.at(j, i), 1e-15);
      }
    }
    if (n > 1) {
      EXPECT_LT(rho(w), 1.0 - 1e-9) << "connected graphs mix";
    }
  }
}

TEST(EdgeList, RejectsDisconnectedSelfLoopAndOutOfRange) {
  EXPECT_THROW(validate_edge_list({{0, 1}, {2, 3}}, 4), Error);
  EXPECT_THROW(validate_edge_list({{0, 0}, {0, 1}}, 2), Error);
  EXPECT_THROW(validate_edge_list({{0, 5}}, 2), Error);
  EXPECT_NO_THROW(validate_edge_list({}, 1));
}

TEST(Neighbours, BadParametersAreErrors) {
  Graph g = graph_of(Kind::kRing);
  EXPECT_THROW(neighbours(g, 0, 0, 0), Error);
  EXPECT_THROW(neighbours(g, 4, 4, 0), Error);
  EXPECT_THROW(neighbours(g, 4, -1, 0), Error);
  EXPECT_THROW(parse_kind("hypercube"), Error);
  Graph t{Kind::kTorus, 4, {}};
  EXPECT_THROW(neighbours(t, 6, 0, 0), Error);
}

TEST(Neighbours, SmallNDefined) {
  for (Kind k : {Kind::kRing, Kind::kExponential, Kind::kOnePeerExponential, Kind::kComplete, Kind::kTorus,
                 Kind::kPushSumOnePeerExponential}) {
    Neighbours one = neighbours(graph_of(k), 1, 0, 0);
    EXPECT_DOUBLE_EQ(one.self_weight, 1.0) << kind_name(k);
    EXPECT_TRUE(one.in.empty());
    Neighbours two = neighbours(graph_of(k), 2, 0, 3);
    ASSERT_EQ(two.in.size(), 1u) << kind_name(k);
    EXPECT_EQ(two.in[0].peer, 1);
  }
}

TEST(Names, RoundTrip) {
  for (const std::string& name : kind_names()) EXPECT_EQ(kind_name(parse_kind(name)), name);
}

}  // namespace
}  // namespace gossip::topology
