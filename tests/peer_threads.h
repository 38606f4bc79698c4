// Runs n peers as threads over one in-process fabric, collecting each one's failure (gloo's
// BaseTest::spawn): body(rank, transport) runs on its own thread; a peer that throws fails the
// test with its message.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "transport/inproc/inproc_transport.h"

namespace gossip::testing {

template <typename F>
void run_peers(int n, F body) {
  peer::InprocFabric fabric(n);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        peer::InprocTransport t(fabric, r);
        body(r, t);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "peer " << r;
}

}  // namespace gossip::testing
