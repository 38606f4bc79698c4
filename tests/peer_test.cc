// The library's API (include/gossip/peer.h) on a peer alone: mix() takes the steps in order from
// start_step() — a repeated or skipped step is an error naming both steps, and a call that fails
// moves nothing — and next_step()/total_steps() say where the caller's loop stands.
#include "gossip/peer.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "process_util.h"

namespace gossip {
namespace {

std::string error_of(Peer& peer, int64_t step, std::span<float> params) {
  try {
    peer.mix(step, params);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(PeerApi, MixTakesTheStepsInOrder) {
  testing::TempDir dir;
  PeerOptions o;
  o.config = dir.write("alone.yaml", "seed: 1\n");
  o.rank = 0;
  o.steps = 5;
  std::vector<float> x(100, 1.0f);
  Peer peer(o, x);
  EXPECT_EQ(peer.start_step(), 0);
  EXPECT_EQ(peer.total_steps(), 5);
  for (int64_t step = peer.start_step(); step < 3; step = peer.next_step()) EXPECT_TRUE(peer.mix(step, x));
  EXPECT_EQ(peer.next_step(), 3);
  EXPECT_EQ(error_of(peer, 2, x),
            "gossip::Peer: mix(step 2) out of order: this peer's next step is 3 (one mix per step, in order from "
            "start_step; after the run takes back a peer it had cut off, that peer continues at the run's step: loop "
            "on next_step)");
  EXPECT_NE(error_of(peer, 4, x).find("mix(step 4) out of order: this peer's next step is 3"), std::string::npos);
  std::vector<float> small(99, 1.0f);
  EXPECT_NE(error_of(peer, 3, small).find("a buffer of 99 floats"), std::string::npos);
  EXPECT_EQ(peer.next_step(), 3) << "a call that failed moved the step";
  EXPECT_EQ(error_of(peer, 3, x), "no error");
  EXPECT_EQ(peer.next_step(), 4);
}

}  // namespace
}  // namespace gossip
