#include "common/endpoint.h"

#include <gtest/gtest.h>

#include <utility>

namespace gossip {
namespace {

TEST(EndpointProblem, AcceptsWhatPeersBindAndNamesWhatIsWrong) {
  for (const char* good : {"tcp://127.0.0.1:0", "tcp://node07:29500", "tcp://*:5555", "tcp://[::1]:5555",
                           "tcp://[fe80::1%eth0]:5555", "tcp://eth0:65535", "tcp://my-host_2.example.org:1",
                           "ipc:///tmp/run/peer-0", "inproc://a"})
    EXPECT_EQ(endpoint_problem(good), std::nullopt) << good;
  const std::pair<const char*, const char*> bad[] = {
      {"foo", "must start with tcp://, ipc:// or inproc://"},
      {"udp://1.2.3.4:5", "must start with tcp://"},
      {"ipc://", "has no path after ipc://"},
      {"tcp://127.0.0.1", "has no port"},
      {"tcp://:5555", "has no host"},
      {"tcp://127.0.0.1:99999", "has port '99999' (expected a number in 0..65535)"},
      {"tcp://127.0.0.1:", "has port ''"},
      {"tcp://127.0.0.1:5x", "has port '5x'"},
      {"tcp://127.0.0.1:-1", "has port '-1'"},
      {"tcp://[::1:5555", "malformed IPv6 host"},
      {"tcp://::1:5555", "malformed host '::1'"},
      {"tcp://node 7:5555", "malformed host 'node 7'"},
      {"tcp://a\nb:1", "malformed host 'a\\x0ab'"},  // escaped, never a raw newline
  };
  for (const auto& [endpoint, says] : bad) {
    const std::optional<std::string> why = endpoint_problem(endpoint);
    ASSERT_TRUE(why.has_value()) << endpoint << " accepted";
    EXPECT_NE(why->find(says), std::string::npos) << endpoint << ": " << *why;
  }
}

// A member of a run between processes: tcp:// or ipc:// (the YAML's peer list, a join request's
// endpoint, gossip::Peer's join/bind), and the same checks of the rest.
TEST(PeerEndpointProblem, TcpAndIpcOnly) {
  for (const char* good : {"tcp://127.0.0.1:0", "tcp://[::1]:5555", "ipc:///tmp/run/peer-0"})
    EXPECT_EQ(peer_endpoint_problem(good), std::nullopt) << good;
  EXPECT_EQ(peer_endpoint_problem("inproc://a"), "must start with tcp:// or ipc://");
  EXPECT_EQ(peer_endpoint_problem("udp://1.2.3.4:5"), "must start with tcp:// or ipc://");
  EXPECT_EQ(peer_endpoint_problem("tcp://127.0.0.1:99999"), "has port '99999' (expected a number in 0..65535)");
  EXPECT_EQ(peer_endpoint_problem("ipc://"), "has no path after ipc://");
}

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
