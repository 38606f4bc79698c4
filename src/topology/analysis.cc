#include "topology/analysis.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <optional>
#include <utility>
#include <random>

#include "topology/lanczos.h"

namespace gossip::topology {
namespace {

// W(round) by rows, as the topology gives them: row i = (self weight, in-links).
struct SparseRows {
  std::vector<double> self;
  std::vector<std::vector<Link>> in;
};

SparseRows sparse_mixing(const Graph& graph, int n, int64_t round) {
  SparseRows w;
  w.self.resize(n);
  w.in.resize(n);
  for (int i = 0; i < n; ++i) {
    Neighbours nb = neighbours(graph, n, i, round);
    w.self[i] = nb.self_weight;
    w.in[i] = std::move(nb.in);
  }
  return w;
}

// y = W·x (transposed: y = Wᵀ·x), one value per peer.
void apply(const SparseRows& w, const double* x, double* y, bool transposed) {
  const int n = static_cast<int>(w.self.size());
  for (int i = 0; i < n; ++i) y[i] = w.self[i] * x[i];
  for (int i = 0; i < n; ++i)
    for (const Link& l : w.in[i]) {
      if (transposed) y[l.peer] += l.weight * x[i];
      else y[i] += l.weight * x[l.peer];
    }
}

// x − (mean of x)·1: the product of J = 11ᵀ/n taken off.
void remove_mean(std::vector<double>& x) {
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double& v : x) v -= mean;
}

// ‖D‖₂ = sqrt(λmax(DᵀD)) for D = M − J, M given by its product and its transpose's.
double rho_of(int n, const std::function<void(std::vector<double>&, bool)>& times_m) {
  std::vector<double> u(n);
  const double top = largest_psd_eigenvalue(n, [&](const double* x, double* y) {
    u.assign(x, x + n);
    times_m(u, false);  // D·x = M·x − J·x
    double mean = 0;
    for (int i = 0; i < n; ++i) mean += x[i];
    for (double& v : u) v -= mean / n;
    times_m(u, true);  // Dᵀ·u = Mᵀ·u − J·u
    remove_mean(u);
    std::copy(u.begin(), u.end(), y);
  });
  return std::sqrt(top);
}

// Row 0 of W as (offset, weight) pairs when W is circulant (row i gives peer (i + offset) mod n
// that weight, for every i), else nothing.
std::optional<std::vector<std::pair<int, double>>> circulant_row(const SparseRows& w) {
  const int n = static_cast<int>(w.self.size());
  auto row = [&](int i) {
    std::vector<std::pair<int, double>> r{{0, w.self[i]}};
    for (const Link& l : w.in[i]) r.push_back({(l.peer - i + n) % n, l.weight});
    std::sort(r.begin(), r.end());
    return r;
  };
  std::vector<std::pair<int, double>> first = row(0);
  for (int i = 1; i < n; ++i)
    if (row(i) != first) return std::nullopt;
  return first;
}

// e^{2πi·m/n}, exact at the quarter turns (so ½(1 + e^{iπ}) is 0, not 6e-17).
std::complex<double> unit_root(int64_t m, int n) {
  if (4 * m % n == 0) {
    static const std::complex<double> quarter[] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
    return quarter[4 * m / n];
  }
  return std::polar(1.0, 2 * M_PI * static_cast<double>(m) / n);
}

// ρ of a product of circulant matrices: they share the Fourier eigenvectors, so the product's
// eigenvalues are the products of theirs, λ_k = Π_r Σ_o c_r[o]·e^{2πi·o·k/n}, and it is normal:
// ρ = max(|λ_0 − 1|, max_{k≠0} |λ_k|) (J = 11ᵀ/n takes 1 off λ_0 alone). Exact, O(n·degree·rounds).
double circulant_rho(const std::vector<std::vector<std::pair<int, double>>>& rows, int n) {
  double rho = 0;
  for (int k = 0; k < n; ++k) {
    std::complex<double> lambda = 1;
    for (const auto& row : rows) {
      std::complex<double> sum = 0;
      for (const auto& [offset, weight] : row)
        sum += weight * unit_root(int64_t(offset) * k % n, n);
      lambda *= sum;
    }
    rho = std::max(rho, std::abs(k == 0 ? lambda - 1.0 : lambda));
  }
  return rho;
}

// ρ of W(rounds − 1)⋯W(0), from the sparse rows: exact through the Fourier basis when every
// W(r) is circulant (ring, exponential graphs, complete), else by Lanczos.
double rho_of_rounds(const Graph& graph, int n, int rounds) {
  std::vector<SparseRows> w;
  for (int r = 0; r < rounds; ++r) w.push_back(sparse_mixing(graph, n, r));
  std::vector<std::vector<std::pair<int, double>>> circulant;
  for (const SparseRows& wr : w)
    if (std::optional<std::vector<std::pair<int, double>>> row = circulant_row(wr)) circulant.push_back(std::move(*row));
  if (static_cast<int>(circulant.size()) == rounds) return circulant_rho(circulant, n);
  std::vector<double> tmp(n);
  return rho_of(n, [&](std::vector<double>& x, bool transposed) {
    for (int r = 0; r < rounds; ++r) {  // M = W(p−1)⋯W(0); Mᵀ = W(0)ᵀ⋯W(p−1)ᵀ
      apply(w[transposed ? rounds - 1 - r : r], x.data(), tmp.data(), transposed);
      x.swap(tmp);
    }
  });
}

}  // namespace

Matrix identity(int n) {
  Matrix m{n, std::vector<double>(size_t(n) * n, 0.0)};
  for (int i = 0; i < n; ++i) m.at(i, i) = 1;
  return m;
}

Matrix multiply(const Matrix& x, const Matrix& y) {
  const int n = x.n;
  Matrix z{n, std::vector<double>(size_t(n) * n, 0.0)};
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) {
      const double xik = x.at(i, k);
      if (xik == 0) continue;
      for (int j = 0; j < n; ++j) z.at(i, j) += xik * y.at(k, j);
    }
  return z;
}

Matrix mixing_matrix(const Graph& graph, int n, int64_t round) {
  Matrix w{n, std::vector<double>(size_t(n) * n, 0.0)};
  for (int i = 0; i < n; ++i) {
    Neighbours nb = neighbours(graph, n, i, round);
    w.at(i, i) = nb.self_weight;
    for (const Link& l : nb.in) w.at(i, l.peer) += l.weight;
  }
  return w;
}

Matrix mixing_product(const Graph& graph, int n, int64_t round, int rounds) {
  Matrix p = identity(n);
  for (int r = 0; r < rounds; ++r) p = multiply(mixing_matrix(graph, n, round + r), p);
  return p;
}

double rho(const Matrix& w) {
  const int n = w.n;
  std::vector<double> tmp(n);
  return rho_of(n, [&](std::vector<double>& x, bool transposed) {
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += (transposed ? w.at(j, i) : w.at(i, j)) * x[j];
      tmp[i] = s;
    }
    x.swap(tmp);
  });
}

Report analyse(const Graph& graph, int n) {
  Report r;
  r.period = period(graph, n);
  r.rho_one_round = rho_of_rounds(graph, n, 1);
  r.rho_period = r.period == 1 ? r.rho_one_round : rho_of_rounds(graph, n, r.period);
  r.gap = 1.0 - std::pow(r.rho_period, 1.0 / r.period);
  return r;
}

std::vector<double> simulate_consensus(const Graph& graph, int n, int rounds, int dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x(size_t(n) * dim);
  for (double& v : x) v = normal(rng);
  return consensus_trajectory(graph, n, rounds, dim, std::move(x));
}

std::vector<double> consensus_trajectory(const Graph& graph, int n, int rounds, int dim, std::vector<double> x) {
  auto distance = [&](const std::vector<double>& v) {
    std::vector<double> mean(dim, 0.0);
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < dim; ++d) mean[d] += v[size_t(i) * dim + d] / n;
    double xi = 0;
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < dim; ++d) xi += std::pow(v[size_t(i) * dim + d] - mean[d], 2);
    return xi / n;
  };
  std::vector<double> out{distance(x)};
  std::vector<double> next(x.size());
  for (int r = 0; r < rounds; ++r) {
    const SparseRows w = sparse_mixing(graph, n, r);
    for (int i = 0; i < n; ++i) {
      double* out_i = next.data() + size_t(i) * dim;
      const double* x_i = x.data() + size_t(i) * dim;
      for (int d = 0; d < dim; ++d) out_i[d] = w.self[i] * x_i[d];
      for (const Link& l : w.in[i]) {
        const double* x_j = x.data() + size_t(l.peer) * dim;
        for (int d = 0; d < dim; ++d) out_i[d] += l.weight * x_j[d];
      }
    }
    x.swap(next);
    out.push_back(distance(x));
  }
  return out;
}

}  // namespace gossip::topology
