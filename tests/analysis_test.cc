#include "topology/analysis.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gossip::topology {
namespace {

TEST(Analysis, RhoOfAverageIsZeroAndOfIdentityIsOne) {
  Matrix j{4, std::vector<double>(16, 0.25)};
  EXPECT_NEAR(rho(j), 0.0, 1e-12);
  EXPECT_NEAR(rho(identity(5)), 1.0, 1e-12);
}

TEST(Analysis, RhoOfNonSymmetricMatrixIsLargestSingularValue) {
  // Permutation-like circulant: all singular values of W − J are 1 except the averaged one.
  Matrix shift{3, {0, 1, 0, 0, 0, 1, 1, 0, 0}};
  EXPECT_NEAR(rho(shift), 1.0, 1e-9);
}

TEST(Analysis, ReportForOnePeerExponential) {
  Report r = analyse(Graph{Kind::kOnePeerExponential, 0, {}}, 8);
  EXPECT_EQ(r.period, 3);
  EXPECT_NEAR(r.rho_period, 0.0, 1e-9);
  EXPECT_NEAR(r.gap, 1.0, 1e-6);
  Report ring = analyse(Graph{Kind::kRing, 0, {}}, 8);
  EXPECT_NEAR(ring.gap, 1 - (1 + 2 * std::cos(2 * M_PI / 8)) / 3, 1e-9);
}

// Thousands of peers, as gossip-topology --n 4096 asks (a dense eigensolver took minutes at 512
// and hours at 4096): circulant graphs through their Fourier eigenvalues, the torus (not
// circulant) by Lanczos, each against its closed form.
TEST(Analysis, LargeGraphsMatchTheirClosedForms) {
  const int n = 4096;
  EXPECT_NEAR(analyse(Graph{Kind::kRing, 0, {}}, n).rho_one_round, (1 + 2 * std::cos(2 * M_PI / n)) / 3, 1e-13);
  EXPECT_NEAR(analyse(Graph{Kind::kExponential, 0, {}}, n).rho_one_round, 1 - 2.0 / 13, 1e-13);  // τ = 12
  const Report one_peer = analyse(Graph{Kind::kOnePeerExponential, 0, {}}, n);
  EXPECT_NEAR(one_peer.rho_one_round, std::cos(M_PI / n), 1e-13);  // ½(I + shift): |½(1 + e^{2πik/n})|
  EXPECT_EQ(one_peer.rho_period, 0.0);                             // the exact average after τ rounds
  const Report torus = analyse(Graph{Kind::kTorus, 64, {}}, n);    // 64 × 64, weight 1/5 each
  EXPECT_NEAR(torus.rho_one_round, (3 + 2 * std::cos(2 * M_PI / 64)) / 5, 1e-11);
}

// The two ways to ρ agree: Fourier (analyse, circulant graphs) and Lanczos on the dense matrix.
TEST(Analysis, FourierAndLanczosAgree) {
  for (Kind kind : {Kind::kRing, Kind::kExponential, Kind::kOnePeerExponential, Kind::kComplete})
    for (int n : {2, 7, 30, 64}) {
      const Graph g{kind, 0, {}};
      EXPECT_NEAR(analyse(g, n).rho_one_round, rho(mixing_matrix(g, n, 0)), 1e-12) << kind_name(kind) << " n " << n;
    }
}

TEST(Analysis, SimulatedRingConsensusDecaysAtRhoSquared) {
  const int n = 8;
  auto xi = simulate_consensus(Graph{Kind::kRing, 0, {}}, n, 30, 64, 1);
  ASSERT_EQ(xi.size(), 31u);
  const double r = (1 + 2 * std::cos(2 * M_PI / n)) / 3;
  EXPECT_NEAR(xi[30] / xi[29], r * r, 0.01 * r * r);
  for (size_t k = 1; k < xi.size(); ++k) EXPECT_LE(xi[k], xi[k - 1] * (1 + 1e-12));
}

TEST(Analysis, SimulatedOnePeerReachesAverageInTauRounds) {
  auto xi = simulate_consensus(Graph{Kind::kOnePeerExponential, 0, {}}, 16, 4, 8, 2);
  EXPECT_GT(xi[3], 1e-6);
  EXPECT_LT(xi[4], 1e-24);
}

}  // namespace
}  // namespace gossip::topology
