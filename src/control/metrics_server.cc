#include "control/metrics_server.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (C++20).
#include <utility>

#include <chrono>
#include <memory>

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
      serve(std::make_shared<Connection>(io, std::move(socket)));
      accept();
    });
  }

  // One short request per connection (scrapers do not pipeline), read and answered without
  // blocking the thread: a client that connects and sends nothing, or never reads, holds only its
  // own connection, closed after kDeadline, and neither other scrapes nor the destructor wait for it.
  static constexpr std::chrono::seconds kDeadline{5};
  static constexpr size_t kMaxRequestBytes = 8192;
  struct Connection {
    Connection(asio::io_context& io, tcp::socket s) : socket(std::move(s)), deadline(io, kDeadline) {}
    tcp::socket socket;
    asio::steady_timer deadline;
    asio::streambuf request{kMaxRequestBytes};
    std::string response;
  };

  void serve(const std::shared_ptr<Connection>& c) {
    c->deadline.async_wait([c](boost::system::error_code ec) {
      boost::system::error_code ignored;
      if (!ec) c->socket.close(ignored);  // cancels whatever read or write is still pending
    });
    asio::async_read_until(c->socket, c->request, "\r\n\r\n", [this, c](boost::system::error_code ec, size_t) {
      // A request cut short (the peer half-closed, or it filled kMaxRequestBytes) is answered by
      // what it starts with; one whose connection closed (the deadline) is not answered.
      if (ec && ec != asio::error::eof && ec != asio::error::not_found) return;
      const std::string request(asio::buffers_begin(c->request.data()), asio::buffers_end(c->request.data()));
      c->response = response_to(request);
      asio::async_write(c->socket, asio::buffer(c->response), [c](boost::system::error_code, size_t) {
        boost::system::error_code ignored;
        c->deadline.cancel();
        c->socket.close(ignored);
      });
    });
  }

  std::string response_to(const std::string& request) const {
    std::string status = "200 OK", body, type = "text/plain; version=0.0.4";
    if (request.rfind("GET /metrics", 0) == 0) {
      body = render();
    } else {
      status = "404 Not Found";
      body = "try GET /metrics\n";
      type = "text/plain";
    }
    return "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
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
