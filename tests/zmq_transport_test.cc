#include "peer/zmq_transport.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "peer/collectives.h"
#include "peer/gossip_step.h"

namespace gossip::peer {
namespace {

namespace fs = std::filesystem;

class ZmqTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gossip_zmq_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  ZmqTransportOptions options(int rank, int n) {
    ZmqTransportOptions o;
    o.rank = rank;
    o.endpoints.assign(n, "tcp://127.0.0.1:0");
    o.rendezvous_dir = dir_.string();
    o.max_total_floats = 1 << 20;
    o.max_chunk_bytes = 1 << 16;
    o.connect_timeout_s = 5;
    o.linger_s = 1;
    return o;
  }
  fs::path dir_;
};

TEST_F(ZmqTransportTest, ChunkedVectorsTravelBothWays) {
  ZmqTransport a(options(0, 2)), b(options(1, 2));
  EXPECT_NE(a.bound_endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  auto data = std::make_shared<std::vector<float>>(100000);
  for (size_t i = 0; i < data->size(); ++i) (*data)[i] = float(i);
  send_vector(a, 1, {MessageKind::kGossip, 3, 0}, data->data(), data, 0, data->size(), data->size(), 0, 4096);
  send_vector(b, 0, {MessageKind::kGossip, 3, 0}, data->data(), data, 0, 10, data->size(), 0.5, 4096);
  std::vector<float> got(data->size(), -1);
  receive_vector(b, 0, {MessageKind::kGossip, 3, 0}, 0, got.size(), 5.0, [&](size_t i, const float* v, size_t c) {
    std::copy(v, v + c, got.begin() + i);
  });
  EXPECT_EQ(got, *data);
  double w = receive_vector(a, 1, {MessageKind::kGossip, 3, 0}, 0, 10, 5.0, [](size_t, const float*, size_t) {}).weight;
  EXPECT_EQ(w, 0.5);
  EXPECT_GE(a.stats().bytes_sent, 400000u);
}

// Over real sockets the receiver checks each chunk's checksum itself, and the same pass gives the
// chunk's sum of squares to GossipStep's outlier screen (no in-process shortcut involved).
TEST_F(ZmqTransportTest, GossipScreensOutliersWithTheChecksumPassNorms) {
  const int n = 3;
  const size_t dim = 3000, chunk = 1000;
  std::vector<std::vector<float>> x(n, std::vector<float>(dim)), out(n, std::vector<float>(dim));
  for (int r = 0; r < n; ++r) std::fill(x[r].begin(), x[r].end(), float(r + 1));
  std::fill(x[1].begin() + 1000, x[1].begin() + 2000, 1e4f);  // peer 1's second chunk
  std::vector<std::thread> peers;
  for (int r = 0; r < n; ++r)
    peers.emplace_back([&, r] {
      ZmqTransport t(options(r, n));
      GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, chunk, 10.0, 10.0);
      step.step(0, x[r].data(), out[r].data());
    });
  for (auto& p : peers) p.join();
  for (int r : {0, 2}) {
    const float self = float(r + 1), other = r == 0 ? 3.0f : 1.0f;
    EXPECT_FLOAT_EQ(out[r][0], 2.0f);
    EXPECT_FLOAT_EQ(out[r][1500], (2 * self + other) / 3) << "peer 1's outlier chunk is not mixed in";
    EXPECT_FLOAT_EQ(out[r][2999], 2.0f);
  }
}

// bf16 gossip over real sockets: chunks of an odd number of 2-byte values (payloads that are not
// whole floats), checked and scanned as bf16 by the receiver, half the bytes of f32.
TEST_F(ZmqTransportTest, Bf16GossipTravelsAsHalfTheBytes) {
  const int n = 3;
  const size_t dim = 3001, chunk = 999;
  std::vector<std::vector<float>> x(n, std::vector<float>(dim)), out(n, std::vector<float>(dim));
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; ++d) x[r][d] = float(r + 1) + float(d % 4) * 0.25f;  // exact in bf16
  std::vector<uint64_t> sent(n);
  std::vector<std::thread> peers;
  for (int r = 0; r < n; ++r)
    peers.emplace_back([&, r] {
      ZmqTransport t(options(r, n));
      GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, chunk, 10.0, 10.0, Dtype::kBf16);
      step.step(0, x[r].data(), out[r].data());
      sent[r] = t.stats().bytes_sent;
    });
  for (auto& p : peers) p.join();
  for (int r = 0; r < n; ++r)
    for (size_t d = 0; d < dim; d += 250) EXPECT_FLOAT_EQ(out[r][d], 2.0f + float(d % 4) * 0.25f) << r << "," << d;
  EXPECT_EQ(sent[0], 2 * (4 * kHeaderBytes + dim * 2)) << "two neighbours, four chunks each, 2 bytes a value";
}

// A rogue client sends garbage, a wrong version and a wrong model size; each is dropped and
// logged, and a good message sent after them still arrives.
TEST_F(ZmqTransportTest, GarbageIsDroppedAndTheNextGoodMessageArrives) {
  ZmqTransport a(options(0, 2));
  zmq::context_t ctx;
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::routing_id, "r1");
  rogue.set(zmq::sockopt::linger, 0);
  rogue.connect(a.bound_endpoint());
  rogue.send(zmq::str_buffer("hello, not a gossip peer"), zmq::send_flags::none);
  auto send_raw = [&](Header h, std::vector<float> payload) {
    h.sender = 1;
    h.payload_bytes = static_cast<uint32_t>(payload.size() * 4);
    h.checksum = message_checksum(h, payload.data(), h.payload_bytes);
    uint8_t head[kHeaderBytes];
    encode_header(h, head);
    rogue.send(zmq::buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
    rogue.send(zmq::buffer(payload.data(), payload.size() * 4), zmq::send_flags::none);
  };
  Header h;
  h.kind = static_cast<uint16_t>(MessageKind::kGossip);
  h.total_floats = 2;
  Header old_version = h;
  old_version.version = 0;
  send_raw(old_version, {1, 2});
  Header huge = h;
  huge.total_floats = 1ull << 40;  // another model shape
  send_raw(huge, {1, 2});
  send_raw(h, {7, 8});
  std::vector<float> got;
  receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 2, 5.0,
                 [&](size_t, const float* v, size_t c) { got.assign(v, v + c); });
  EXPECT_EQ(got, (std::vector<float>{7, 8}));
  EXPECT_EQ(a.stats().messages_dropped, 3u);
}

TEST_F(ZmqTransportTest, MissingNeighbourEndpointIsAClearError) {
  ZmqTransportOptions o = options(0, 2);
  o.connect_timeout_s = 0.2;
  ZmqTransport a(o);
  auto data = std::make_shared<std::vector<float>>(4, 1.0f);
  send_vector(a, 1, {MessageKind::kGossip, 0, 0}, data->data(), data, 0, 4, 4, 0, 4096);
  try {
    receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 4, 2.0, [](size_t, const float*, size_t) {});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("did not publish its endpoint"), std::string::npos) << e.what();
  }
}

// A second peer given the ipc:// endpoint of a live one is refused (ZeroMQ alone would unlink
// the socket file and take the endpoint over); a stale file of a peer that has ended is reused.
TEST_F(ZmqTransportTest, IpcEndpointOfALivePeerIsRefused) {
  ZmqTransportOptions o = options(0, 1);
  o.endpoints = {"ipc://" + (dir_ / "ep-0").string()};
  {
    ZmqTransport live(o);
    try {
      ZmqTransport second(o);
      FAIL() << "bound an endpoint a live peer holds";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("another process is listening on it"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(o.endpoints[0]), std::string::npos) << e.what();
    }
  }
  const std::string stale = (dir_ / "stale").string();
  {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, stale.c_str(), stale.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);  // the file stays, nobody listens
  }
  ASSERT_TRUE(fs::exists(stale));
  o.endpoints = {"ipc://" + stale};
  EXPECT_NO_THROW(ZmqTransport reused(o));
}

TEST_F(ZmqTransportTest, BindFailureNamesTheEndpoint) {
  ZmqTransportOptions o = options(0, 1);
  o.endpoints = {"tcp://256.0.0.1:1"};
  try {
    ZmqTransport a(o);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("256.0.0.1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gossip::peer

namespace gossip::peer {
namespace {

// Messages queued just before a transport is destroyed still arrive (linger), also when the
// connection to that neighbour is made only at that moment.
TEST_F(ZmqTransportTest, MessagesSentJustBeforeShutdownArrive) {
  for (int trial = 0; trial < 20; ++trial) {
    auto b = std::make_unique<ZmqTransport>(options(1, 2));
    {
      ZmqTransport a(options(0, 2));
      auto data = std::make_shared<std::vector<float>>(300000, float(trial));
      send_vector(a, 1, {MessageKind::kAllGather, uint64_t(trial), 0}, data->data(), data, 0, data->size(), data->size(), 0, 1 << 14);
    }
    size_t got = 0;
    receive_vector(*b, 0, {MessageKind::kAllGather, uint64_t(trial), 0}, 0, 300000, 5.0,
                   [&](size_t, const float*, size_t c) { got += c; });
    EXPECT_EQ(got, 300000u) << "trial " << trial;
    std::filesystem::remove(dir_ / "peer-0");
    std::filesystem::remove(dir_ / "peer-1");
  }
}

}  // namespace
}  // namespace gossip::peer
