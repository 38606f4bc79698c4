#include "control/metrics_server.h"

#include <gtest/gtest.h>

#include <utility>  // before asio: see metrics_server.cc

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <boost/asio.hpp>

#include "control/control.h"

namespace gossip::peer {
namespace {

std::string http_get(int port, const std::string& path) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  asio::write(s, asio::buffer(req));
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (size_t n; (n = s.read_some(asio::buffer(buf), ec)) > 0 || !ec;) out.append(buf, n);
  return out;
}

TEST(MetricsServer, ServesPrometheusTextOfThePeer) {
  ControlInfo info;
  info.rank = 3;
  info.n = 8;
  info.total_steps = 50;
  ControlState control(info, nullptr);
  control.set_round(12);
  control.set_progress(0.25, 0.9, 1234, 5);
  MetricsServer server("127.0.0.1", 0, [&] { return control.prometheus_text(); });
  ASSERT_GT(server.port(), 0);
  const std::string r = http_get(server.port(), "/metrics");
  EXPECT_NE(r.find("200 OK"), std::string::npos) << r;
  EXPECT_NE(r.find("# TYPE gossip_round gauge"), std::string::npos) << r;
  EXPECT_NE(r.find("gossip_round{peer=\"3\"} 12"), std::string::npos) << r;
  EXPECT_NE(r.find("gossip_loss{peer=\"3\"} 0.25"), std::string::npos) << r;
  EXPECT_NE(http_get(server.port(), "/").find("404"), std::string::npos);
}

// A client that connects and sends nothing (a port scan, a stuck scraper) holds only its own
// connection: another scrape is answered meanwhile, and the server (so the peer) still stops while
// it is connected. Before, the one serving thread blocked in that client's read: every later
// scrape waited, and the peer could not exit until the client went away.
TEST(MetricsServer, AnIdleClientBlocksNeitherScrapesNorTheStop) {
  namespace asio = boost::asio;
  auto server = std::make_unique<MetricsServer>("127.0.0.1", 0, [] { return std::string("gossip_round 1\n"); });
  asio::io_context io;
  asio::ip::tcp::socket idle(io);
  idle.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server->port())});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // accepted, its read pending
  auto scrape = std::async(std::launch::async, [&] { return http_get(server->port(), "/metrics"); });
  ASSERT_EQ(scrape.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "a scrape waited for the idle client";
  EXPECT_NE(scrape.get().find("gossip_round 1"), std::string::npos);
  auto stop = std::async(std::launch::async, [&] { server.reset(); });
  ASSERT_EQ(stop.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "the stop waited for the idle client";
}

// A request that never ends its header is answered by what it starts with once it fills the
// server's buffer, and one that never comes is closed after the deadline (no connection is held
// for ever).
TEST(MetricsServer, OverlongAndSilentRequestsEnd) {
  namespace asio = boost::asio;
  MetricsServer server("127.0.0.1", 0, [] { return std::string("gossip_round 1\n"); });
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
  const std::string head = "GET /metrics ";
  asio::write(s, asio::buffer(head + std::string(8192 - head.size(), 'x')));  // the server's whole buffer
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (size_t n; (n = s.read_some(asio::buffer(buf), ec)) > 0 || !ec;) out.append(buf, n);
  EXPECT_NE(out.find("200 OK"), std::string::npos) << out;
  asio::ip::tcp::socket silent(io);
  silent.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
  const size_t n = silent.read_some(asio::buffer(buf), ec);  // returns once the server closes it
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
}

TEST(MetricsServer, BindFailureNamesTheAddress) {
  try {
    MetricsServer s("256.1.1.1", 0, [] { return std::string(); });
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("256.1.1.1"), std::string::npos);
  }
}

}  // namespace
}  // namespace gossip::peer
