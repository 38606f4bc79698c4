// The largest eigenvalue of a symmetric positive semi-definite operator given only as a product
// (y = A x), by Lanczos iteration with full reorthogonalisation: what ρ = ‖W − 11ᵀ/n‖₂ needs for
// sparse mixing matrices of thousands of peers, where a dense eigensolver takes O(n³) per sweep.
#pragma once

#include <functional>

namespace gossip::topology {

// y = A·x for vectors of n doubles (x and y do not overlap).
using Operator = std::function<void(const double* x, double* y)>;

// λmax(A) for a symmetric PSD `a` of size n, to about 1e-12 relative or 1e-24 absolute, whichever
// is larger (so √λ to about 1e-12); exact to rounding once the Krylov space is the whole space (at
// most n steps). The start vector is fixed (seeded), so the
// result is the same on every call.
double largest_psd_eigenvalue(int n, const Operator& a);

}  // namespace gossip::topology
