#include "topology/analysis.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace gossip::topology {
namespace {

// Largest eigenvalue of a symmetric matrix by cyclic Jacobi rotations (exact to rounding for the
// sizes used here, n ≤ a few hundred).
double largest_symmetric_eigenvalue(Matrix m) {
  const int n = m.n;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) off += m.at(i, j) * m.at(i, j);
    if (off < 1e-30) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = m.at(p, q);
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (m.at(q, q) - m.at(p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p, q
          const double akp = m.at(k, p), akq = m.at(k, q);
          m.at(k, p) = c * akp - s * akq;
          m.at(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rows p, q
          const double apk = m.at(p, k), aqk = m.at(q, k);
          m.at(p, k) = c * apk - s * aqk;
          m.at(q, k) = s * apk + c * aqk;
        }
      }
  }
  double best = 0;
  for (int i = 0; i < n; ++i) best = std::max(best, m.at(i, i));
  return best;
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
  Matrix d = w;
  for (double& v : d.a) v -= 1.0 / n;
  // ‖D‖₂² = λmax(DᵀD).
  Matrix dtd{n, std::vector<double>(size_t(n) * n, 0.0)};
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += d.at(k, i) * d.at(k, j);
      dtd.at(i, j) = s;
    }
  return std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(dtd)));
}

Report analyse(const Graph& graph, int n) {
  Report r;
  r.period = period(graph, n);
  r.rho_one_round = rho(mixing_matrix(graph, n, 0));
  r.rho_period = r.period == 1 ? r.rho_one_round : rho(mixing_product(graph, n, 0, r.period));
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
  for (int r = 0; r < rounds; ++r) {
    Matrix w = mixing_matrix(graph, n, r);
    std::vector<double> next(x.size(), 0.0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const double wij = w.at(i, j);
        if (wij == 0) continue;
        for (int d = 0; d < dim; ++d) next[size_t(i) * dim + d] += wij * x[size_t(j) * dim + d];
      }
    x.swap(next);
    out.push_back(distance(x));
  }
  return out;
}

}  // namespace gossip::topology
