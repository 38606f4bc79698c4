// Prometheus metrics over HTTP (Boost.Asio), off by default: one thread serves GET /metrics with
// the text exposition format produced by `render`, which is called on that thread for every
// scrape (it must be thread-safe: ControlState::prometheus_text is).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace gossip::peer {

class MetricsServer {
 public:
  // Binds host:port (0 = any free port) and starts serving; throws gossip::Error naming the
  // address when the bind fails.
  MetricsServer(const std::string& host, int port, std::function<std::string()> render);
  ~MetricsServer();  // stops the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gossip::peer
