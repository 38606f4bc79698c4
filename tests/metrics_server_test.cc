#include "control/metrics_server.h"

#include <gtest/gtest.h>

#include <utility>  // before asio: see metrics_server.cc

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
