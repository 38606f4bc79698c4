#include "common/endpoint.h"

#include <gtest/gtest.h>

namespace gossip {
namespace {

TEST(BindsAnyPort, OnlyTcpPortZero) {
  EXPECT_TRUE(binds_any_port("tcp://127.0.0.1:0"));
  EXPECT_FALSE(binds_any_port("tcp://127.0.0.1:10"));
  EXPECT_FALSE(binds_any_port("ipc:///tmp/x:0"));
}

TEST(EndpointHost, TheHostOfTcpNothingForOtherKinds) {
  EXPECT_EQ(endpoint_host("tcp://node07:29500"), "node07");
  EXPECT_EQ(endpoint_host("tcp://127.0.0.1:0"), "127.0.0.1");
  EXPECT_EQ(endpoint_host("tcp://[::1]:5555"), "[::1]");
  EXPECT_EQ(endpoint_host("tcp://node07"), "node07");  // no port
  EXPECT_EQ(endpoint_host("ipc:///tmp/x:0"), "");
  EXPECT_EQ(endpoint_host("inproc://3"), "");
}

// Loopback: what connects there never left the host (names are not resolved).
TEST(IsLoopback, LoopbackAddressesAndLocalSocketsNotNamesOrOtherAddresses) {
  for (const char* local : {"tcp://127.0.0.1:5555", "tcp://127.3.2.1:0", "tcp://localhost:29500", "tcp://[::1]:5555",
                            "ipc:///tmp/run/peer-0", "inproc://3"})
    EXPECT_TRUE(is_loopback(local)) << local;
  for (const char* other : {"tcp://10.0.0.5:5555", "tcp://node07:29500", "tcp://*:5555", "tcp://0.0.0.0:5555",
                            "tcp://127.0.0.1.example.org:5555", "tcp://lo:5555", "tcp://[::]:5555", "udp://127.0.0.1:1"})
    EXPECT_FALSE(is_loopback(other)) << other;
}

// A rank named by a host name listens on every interface at its port; addresses (valid or not),
// interface names, ipc paths and port 0 are left as they are.
TEST(ListenAddress, HostNamesListenEverywhereTheRestAsWritten) {
  EXPECT_EQ(listen_address("tcp://node07:29500"), "tcp://*:29500");
  EXPECT_EQ(listen_address("tcp://gpu-a1.cluster.local:7001"), "tcp://*:7001");
  EXPECT_EQ(listen_address("tcp://localhost:7001"), "tcp://127.0.0.1:7001");
  for (const char* same : {"tcp://10.0.0.1:5555", "tcp://256.0.0.1:1", "tcp://lo:5555", "tcp://*:5555",
                           "tcp://[::1]:5555", "ipc:///tmp/x/peer-0"})
    EXPECT_EQ(listen_address(same), same) << same;
}

}  // namespace
}  // namespace gossip
