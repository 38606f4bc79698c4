#include "control/metrics_server.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (C++20).
#include <utility>

#include <boost/asio.hpp>

#include "common/error.h"

namespace gossip::peer {

namespace asio = boost::asio;
using asio::ip::tcp;

struct MetricsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;  // acceptor closed: stopping
      serve(std::move(socket));
      accept();
    });
  }

  // One short request per connection (scrapers do not pipeline); bounded read, then close.
  void serve(tcp::socket socket) {
    boost::system::error_code ec;
    std::string request;
    char buf[1024];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
      const size_t n = socket.read_some(asio::buffer(buf), ec);
      if (ec) return;
      request.append(buf, n);
    }
    std::string status = "200 OK", body, type = "text/plain; version=0.0.4";
    if (request.rfind("GET /metrics", 0) == 0) {
      body = render();
    } else {
      status = "404 Not Found";
      body = "try GET /metrics\n";
      type = "text/plain";
    }
    const std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    asio::write(socket, asio::buffer(response), ec);
  }
};

MetricsServer::MetricsServer(const std::string& host, int port, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  impl_->render = std::move(render);
  try {
    tcp::endpoint ep(asio::ip::make_address(host), static_cast<unsigned short>(port));
    impl_->acceptor.open(ep.protocol());
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(ep);
    impl_->acceptor.listen();
  } catch (const std::exception& e) {
    throw Error("metrics http://" + host + ":" + std::to_string(port), std::string("cannot listen: ") + e.what());
  }
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  thread_ = std::thread([this] {
    try {
      impl_->io.run();
    } catch (...) {
      // A scrape gone wrong must not take the peer down; the server simply stops.
    }
  });
}

MetricsServer::~MetricsServer() {
  asio::post(impl_->io, [this] { impl_->acceptor.close(); });
  impl_->io.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gossip::peer
