#include "topology/lanczos.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/random.h"

namespace gossip::topology {
namespace {

// The tridiagonal T_k that Lanczos builds: diagonal a, off-diagonal b (b[i] joins rows i, i+1).
struct Tridiagonal {
  std::vector<double> a, b;
  int size() const { return static_cast<int>(a.size()); }
};

// How many eigenvalues of T exceed x (Sturm sequence: the negative pivots of T − xI count those below).
int count_above(const Tridiagonal& t, double x) {
  int below = 0;
  double d = 1;
  for (int i = 0; i < t.size(); ++i) {
    d = t.a[i] - x - (i > 0 ? t.b[i - 1] * t.b[i - 1] / d : 0.0);
    if (std::abs(d) < 1e-300) d = -1e-300;
    if (d < 0) ++below;
  }
  return t.size() - below;
}

// λmax(T) by bisection between Gershgorin's bounds, to rounding.
double largest_eigenvalue(const Tridiagonal& t) {
  double lo = 0, hi = 0;
  for (int i = 0; i < t.size(); ++i) {
    const double r = (i > 0 ? std::abs(t.b[i - 1]) : 0.0) + (i + 1 < t.size() ? std::abs(t.b[i]) : 0.0);
    lo = std::min(lo, t.a[i] - r);
    hi = std::max(hi, t.a[i] + r);
  }
  for (int step = 0; step < 200 && hi - lo > 1e-16 * std::max(std::abs(lo), std::abs(hi)) + 1e-300; ++step) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    (count_above(t, mid) >= 1 ? lo : hi) = mid;
  }
  return hi;
}

// Solves (T − σI)·x = x in place by Gaussian elimination with partial pivoting (LAPACK's dgtsv).
void solve_shifted(const Tridiagonal& t, double sigma, std::vector<double>& x) {
  const int k = t.size();
  std::vector<double> d(k), du(t.b.begin(), t.b.begin() + (k - 1)), dl = du, du2(k, 0.0);
  for (int i = 0; i < k; ++i) d[i] = t.a[i] - sigma;
  auto nonzero = [](double& v) {
    if (std::abs(v) < 1e-300) v = 1e-300;
  };
  for (int i = 0; i + 1 < k; ++i) {
    if (std::abs(d[i]) >= std::abs(dl[i])) {
      nonzero(d[i]);
      const double f = dl[i] / d[i];
      d[i + 1] -= f * du[i];
      x[i + 1] -= f * x[i];
    } else {  // rows i and i + 1 change places
      const double f = d[i] / dl[i], below = d[i + 1];
      d[i] = dl[i];
      d[i + 1] = du[i] - f * below;
      if (i + 2 < k) {
        du2[i] = du[i + 1];
        du[i + 1] = -f * du2[i];
      }
      du[i] = below;
      std::swap(x[i], x[i + 1]);
      x[i + 1] -= f * x[i];
    }
  }
  nonzero(d[k - 1]);
  x[k - 1] /= d[k - 1];
  if (k > 1) x[k - 2] = (x[k - 2] - du[k - 2] * x[k - 1]) / d[k - 2];
  for (int i = k - 3; i >= 0; --i) x[i] = (x[i] - du[i] * x[i + 1] - du2[i] * x[i + 2]) / d[i];
}

// |last component| of T's unit eigenvector for its eigenvalue θ, by two steps of inverse iteration:
// β_k·|s_k| is then the residual ‖A·y − θ·y‖ of the Ritz vector y, the bound on θ's error.
double last_component(const Tridiagonal& t, double theta) {
  std::vector<double> s(t.size(), 1.0);
  const double sigma = theta + 1e-10 * std::max(std::abs(theta), 1e-300);
  for (int step = 0; step < 2; ++step) {
    solve_shifted(t, sigma, s);
    double norm = 0;
    for (double v : s) norm += v * v;
    norm = std::sqrt(norm);
    if (!(norm > 0) || !std::isfinite(norm)) return 1.0;  // no estimate: not converged
    for (double& v : s) v /= norm;
  }
  return std::abs(s.back());
}

double dot(const std::vector<double>& x, const std::vector<double>& y) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

double largest_psd_eigenvalue(int n, const Operator& a) {
  std::vector<std::vector<double>> q;  // the orthonormal Krylov basis
  std::vector<double> v(n);
  uint64_t state = 0x5eed;
  for (double& x : v) x = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53 - 0.5;
  const double norm0 = std::sqrt(dot(v, v));
  for (double& x : v) x /= norm0;
  Tridiagonal t;
  std::vector<double> w(n);
  double theta = 0;
  for (int j = 0; j < n; ++j) {
    q.push_back(v);
    a(q.back().data(), w.data());
    t.a.push_back(dot(q.back(), w));
    for (int pass = 0; pass < 2; ++pass)  // full reorthogonalisation, twice (Gram-Schmidt)
      for (const std::vector<double>& qi : q) {
        const double c = dot(qi, w);
        for (int i = 0; i < n; ++i) w[i] -= c * qi[i];
      }
    const double beta = std::sqrt(dot(w, w));
    const bool last = j + 1 == n || beta <= 1e-14 * std::max(std::abs(t.a.back()), std::abs(theta)) || beta == 0;
    if (last || j % 8 == 7) {
      theta = largest_eigenvalue(t);
      if (last || beta * last_component(t, theta) <= 1e-12 * theta + 1e-24) return std::max(theta, 0.0);
    }
    t.b.push_back(beta);
    for (int i = 0; i < n; ++i) v[i] = w[i] / beta;
  }
  return std::max(theta, 0.0);
}

}  // namespace gossip::topology
