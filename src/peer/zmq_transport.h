// ZeroMQ transport. One communication thread owns every socket (libzmq's rule): a ROUTER bound on
// this peer's endpoint receives, one DEALER per neighbour sends. The training thread hands sends
// over through a queue plus an eventfd wake-up and takes received chunks from a Mailbox, so it
// never touches a socket, and an exception on the comm thread is stored and rethrown to it.
#pragma once

#include <atomic>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "peer/control.h"
#include "peer/mailbox.h"
#include "peer/transport.h"

namespace gossip::peer {

struct ZmqTransportOptions {
  int rank = 0;
  std::vector<std::string> endpoints;  // one per peer; tcp://host:0 means "any port, via rendezvous"
  std::string rendezvous_dir;          // where port-0 peers publish the endpoint they bound
  uint64_t max_total_floats = ~0ull;   // largest vector a message may belong to (model size + slack)
  size_t max_chunk_bytes = 1 << 20;    // larger payload frames are refused by ZeroMQ itself
  double connect_timeout_s = 60;       // how long to wait for a neighbour to publish its endpoint
  double linger_s = 5;                 // at shutdown, how long unsent messages may still go out
  // CurveZMQ (all empty = plain TCP/IPC): this peer's key pair, every peer's public key by rank,
  // and the public keys allowed to connect (checked by a ZAP handler on the comm thread).
  std::string curve_public, curve_secret;
  std::vector<std::string> peer_public_keys;
  std::vector<std::string> allowed_keys;
};

// Keeps freed large blocks in the heap instead of returning them to the kernel: every received
// chunk is a fresh ZeroMQ allocation, and with glibc's default 128 KiB mmap threshold each would
// cost page faults and zeroing. Process-wide; programs call it once at start-up.
void tune_allocator_for_large_messages();

class ZmqTransport final : public Transport {
 public:
  // Binds and starts the communication thread; throws gossip::Error if the bind fails.
  explicit ZmqTransport(ZmqTransportOptions options);
  ~ZmqTransport() override;  // flushes queued sends (bounded by linger_s), joins the thread
  ZmqTransport(const ZmqTransport&) = delete;
  ZmqTransport& operator=(const ZmqTransport&) = delete;

  int rank() const override { return options_.rank; }
  int size() const override { return static_cast<int>(options_.endpoints.size()); }
  void send(int peer, OutMessage message) override;
  std::optional<InMessage> receive(const MatchKey& key, Clock::time_point deadline) override;
  bool ready(const MatchKey& key) override { return mailbox_.ready(key); }
  std::string endpoint_of(int peer) const override;
  TransportStats stats() const override;

  const std::string& bound_endpoint() const { return bound_endpoint_; }
  // Control requests (status, snapshots) are answered by `handler` on the comm thread; until one
  // is set they are dropped. `handler` must outlive the transport.
  void set_control_handler(ControlHandler* handler) { control_ = handler; }
  // Largest vector a valid message may belong to; larger ones are dropped as another model shape.
  void set_max_total_floats(uint64_t n) { max_total_floats_ = n; }

 private:
  struct Link;
  void comm_main(std::promise<std::string> bound);
  void comm_loop(zmq::socket_t& router, zmq::socket_t* zap, std::vector<Link>& links);
  void answer_zap(zmq::socket_t& zap);
  void receive_all(zmq::socket_t& router);
  void answer_control(zmq::socket_t& router, const zmq::message_t& identity, const Header& request,
                      const zmq::message_t& payload);
  bool flush(Link& link, int peer);
  bool connect(Link& link, int peer);
  void wake();

  ZmqTransportOptions options_;
  std::string bound_endpoint_;
  zmq::context_t context_;
  Mailbox mailbox_;
  int wake_fd_ = -1;  // eventfd: the training thread writes, the comm thread polls
  std::mutex queue_mutex_;
  std::deque<std::pair<int, OutMessage>> queue_;  // guarded by queue_mutex_
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> max_total_floats_;
  std::atomic<ControlHandler*> control_{nullptr};
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, dropped_{0};
  std::atomic<int64_t> wait_ns_{0};
  std::map<std::string, int> drops_by_sender_;  // comm thread only: limits drop logging per sender
  std::thread thread_;
};

}  // namespace gossip::peer
