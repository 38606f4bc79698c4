// Spectral analysis of mixing matrices: W for n peers (dense, for tests and small n), products
// over a period, ρ and the spectral gap (from the sparse rows: exact Fourier eigenvalues for
// circulant graphs, Lanczos otherwise, so n = 4096 takes seconds), and simulated pure averaging.
#pragma once

#include <cstdint>
#include <vector>

#include "topology/topology.h"

namespace gossip::topology {

// Dense row-major n×n matrix.
struct Matrix {
  int n = 0;
  std::vector<double> a;
  double& at(int i, int j) { return a[size_t(i) * n + j]; }
  double at(int i, int j) const { return a[size_t(i) * n + j]; }
};

Matrix identity(int n);
Matrix multiply(const Matrix& x, const Matrix& y);
// W(round) with W_ij the weight peer i gives to peer j.
Matrix mixing_matrix(const Graph& graph, int n, int64_t round);
// W(round + rounds − 1) ⋯ W(round + 1)·W(round).
Matrix mixing_product(const Graph& graph, int n, int64_t round, int rounds);

// ρ = ‖W − 11ᵀ/n‖₂, the largest singular value after removing the average.
double rho(const Matrix& w);

struct Report {
  double rho_one_round = 0;  // ρ of W(0)
  double rho_period = 0;     // ρ of the product over one period (equals rho_one_round when static)
  double gap = 0;            // 1 − ρ per round, from the period: 1 − rho_period^(1/period)
  int period = 1;
};
Report analyse(const Graph& graph, int n);

// Pure averaging from random vectors of `dim` floats per peer (seeded): consensus distance
// Ξ = (1/n) Σ‖x_i − x̄‖² before round 0 and after each of `rounds` rounds.
std::vector<double> simulate_consensus(const Graph& graph, int n, int rounds, int dim, uint64_t seed);
// The same from given vectors: x holds peer i's `dim` values at [i·dim, (i+1)·dim).
std::vector<double> consensus_trajectory(const Graph& graph, int n, int rounds, int dim, std::vector<double> x);

}  // namespace gossip::topology
