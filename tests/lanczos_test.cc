// Lanczos' largest eigenvalue of a PSD operator given as a product: spectra known in closed form,
// a cluster of nearly equal top eigenvalues, the zero operator and a rank-one one.
#include "topology/lanczos.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gossip::topology {
namespace {

Operator diagonal(const std::vector<double>& d) {
  return [d](const double* x, double* y) {
    for (size_t i = 0; i < d.size(); ++i) y[i] = d[i] * x[i];
  };
}

TEST(Lanczos, LargestOfADiagonalSpectrum) {
  std::vector<double> d(300);
  for (size_t i = 0; i < d.size(); ++i) d[i] = std::sin(0.37 * double(i)) + 1.5;  // in [0.5, 2.5], max not at an end
  double want = 0;
  for (double v : d) want = std::max(want, v);
  EXPECT_NEAR(largest_psd_eigenvalue(300, diagonal(d)), want, 1e-12 * want);
}

// The ring's W² has its top eigenvalues 4e-5 apart at n = 1500 (cos(2πk/n) for k = 1, 2): the
// largest is still found to 1e-12, not one of the cluster below it.
TEST(Lanczos, ATightClusterAtTheTop) {
  const int n = 1500;
  std::vector<double> d(n - 1);  // the modes k = 1..n−1 (k = 0, the average, is taken off)
  for (int k = 1; k < n; ++k) d[k - 1] = std::pow((1 + 2 * std::cos(2 * M_PI * k / n)) / 3, 2);
  ASSERT_LT(d[0] - d[1], 5e-5);
  EXPECT_NEAR(largest_psd_eigenvalue(n - 1, diagonal(d)), d[0], 1e-12);
}

TEST(Lanczos, ZeroAndRankOne) {
  EXPECT_EQ(largest_psd_eigenvalue(50, diagonal(std::vector<double>(50, 0.0))), 0.0);
  // A = u·uᵀ with u = (1, 2, ..., n): λmax = ‖u‖².
  const int n = 40;
  const Operator rank_one = [n](const double* x, double* y) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += (i + 1) * x[i];
    for (int i = 0; i < n; ++i) y[i] = (i + 1) * s;
  };
  const double norm2 = n * (n + 1.0) * (2 * n + 1) / 6;
  EXPECT_NEAR(largest_psd_eigenvalue(n, rank_one), norm2, 1e-12 * norm2);
}

}  // namespace
}  // namespace gossip::topology
