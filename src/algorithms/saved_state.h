// The checkpoint form of an algorithm state made of two vectors of the model's size and a flag
// (CHOCO: x̂ and s; gradient tracking: ȳ and the last gradient): a, then b, then 1 or 0.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"

namespace gossip::peer {

inline std::vector<float> pack_state(const std::vector<float>& a, const std::vector<float>& b, bool flag) {
  std::vector<float> state(a);
  state.insert(state.end(), b.begin(), b.end());
  state.push_back(flag ? 1.0f : 0.0f);
  return state;
}

// Throws gossip::Error naming `who` and `what` when the state is not 2·|a| + 1 values.
inline void unpack_state(const std::vector<float>& state, std::vector<float>* a, std::vector<float>* b, bool* flag,
                         const std::string& who, const std::string& what) {
  const size_t n = a->size();
  if (state.size() != 2 * n + 1 || b->size() != n)
    throw Error(who, what + " of " + std::to_string(state.size()) + " values in the checkpoint, expected " +
                         std::to_string(2 * n + 1) + " (2 x parameters + 1)");
  std::copy(state.begin(), state.begin() + n, a->begin());
  std::copy(state.begin() + n, state.begin() + 2 * n, b->begin());
  *flag = state.back() != 0.0f;
}

}  // namespace gossip::peer
