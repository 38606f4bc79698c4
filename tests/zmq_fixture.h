// The fixture of the ZeroMQ transport's tests (zmq_transport_test, single_copy_test): a
// rendezvous directory of its own per test, and the options of peer `rank` of `n` on loopback
// (port 0, published in that directory); a raw connection posing as peer 1.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <zmq.hpp>

#include "transport/zmq/zmq_transport.h"

namespace gossip::peer {

// A connection to `endpoint` that says it is peer 1 (its routing id), for hand-made messages.
inline zmq::socket_t claims_to_be_peer_1(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::routing_id, "r1");
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  return s;
}

class ZmqFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gossip_zmq_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  ZmqTransportOptions options(int rank, int n) {
    ZmqTransportOptions o;
    o.rank = rank;
    o.endpoints.assign(n, "tcp://127.0.0.1:0");
    o.rendezvous_dir = dir_.string();
    o.max_total_floats = 1 << 20;
    o.chunk_bytes = 1 << 16;
    o.timeout_s = 5;
    o.linger_s = 1;
    return o;
  }
  // Peers 0 and 1 of 2, lending each other their chunks (algorithm.single_copy).
  std::pair<ZmqTransportOptions, ZmqTransportOptions> lending_pair() {
    std::pair<ZmqTransportOptions, ZmqTransportOptions> p{options(0, 2), options(1, 2)};
    p.first.single_copy = p.second.single_copy = true;
    return p;
  }
  std::filesystem::path dir_;
};

}  // namespace gossip::peer
