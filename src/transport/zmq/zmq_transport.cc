#include "transport/zmq/zmq_transport.h"

#include <malloc.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <random>

#include "common/error.h"
#include "common/log.h"
#include "common/endpoint.h"
#include "transport/rendezvous.h"
#include "transport/zmq/frames.h"
#include "transport/zmq/link.h"

namespace gossip::peer {
namespace {

namespace fs = std::filesystem;

// True when a process accepts connections on the Unix socket at `path` (a stale file left by a
// run that ended does not).
bool ipc_path_has_listener(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;  // ZeroMQ's bind reports the long path
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answered = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return answered;
}

uint64_t random_cookie() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(::getpid()) << 17);
}

}  // namespace

void tune_allocator_for_large_messages() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

ZmqTransport::ZmqTransport(ZmqTransportOptions options)
    : options_(std::move(options)), context_(1), max_total_floats_(options_.max_total_floats), self_id_(options_.rank),
      cookie_(random_cookie()) {
  if (options_.rank < -1 || options_.rank >= static_cast<int>(options_.endpoints.size()) ||
      (options_.rank == -1 && options_.bind.empty()))
    throw Error("transport", "rank " + std::to_string(options_.rank) + " outside the peer list");
  for (size_t i = 0; i < options_.endpoints.size(); ++i) {
    endpoints_[static_cast<int>(i)] = options_.endpoints[i];
    members_.push_back(static_cast<int>(i));
    if (i < options_.peer_public_keys.size()) keys_[static_cast<int>(i)] = options_.peer_public_keys[i];
  }
  // Under Yama's ptrace_scope 1 only a process's ancestors may read its memory, and peers are
  // siblings: let other processes of this user read ours (Yama 0's rule) so they can copy.
  if (options_.single_copy) ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error("transport", std::string("eventfd: ") + std::strerror(errno));
  lent_answers_ = std::make_shared<LentAnswers>(wake_fd_);
  std::promise<std::string> bound;
  std::future<std::string> bound_future = bound.get_future();
  thread_ = std::thread(&ZmqTransport::comm_main, this, std::move(bound));
  try {
    bound_endpoint_ = bound_future.get();
  } catch (...) {
    thread_.join();
    ::close(wake_fd_);
    throw;
  }
}

ZmqTransport::~ZmqTransport() {
  stop_ = true;
  wake();
  if (thread_.joinable()) thread_.join();
  lent_answers_->close();  // tickets still in the mailbox no longer write the eventfd
  ::close(wake_fd_);
}

void ZmqTransport::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

int ZmqTransport::size() const {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  return endpoints_.empty() ? 0 : endpoints_.rbegin()->first + 1;
}

void ZmqTransport::set_members(const std::vector<PeerAddress>& members, uint32_t epoch) {
  epoch_ = epoch;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    members_.clear();
    for (const PeerAddress& m : members) {
      endpoints_[m.id] = m.endpoint;
      if (!m.key.empty()) keys_[m.id] = m.key;
      members_.push_back(m.id);
    }
    ++members_version_;
  }
  wake();
}

std::string ZmqTransport::log_prefix() const { return "peer " + std::to_string(rank()) + ": "; }

bool ZmqTransport::keeps_bytes_intact(const std::string& endpoint) const {
  return !options_.checksum_always && (!options_.curve_secret.empty() || is_loopback(endpoint));
}

bool ZmqTransport::sends_unchecked(const Header& h, const std::string& endpoint) const {
  return is_vector_kind(h.kind) && h.payload_bytes > 0 && keeps_bytes_intact(endpoint);
}

void ZmqTransport::set_self_id(int id) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (self_id_ >= 0 && id != self_id_) relink_ = true;
    self_id_ = id;
  }
  wake();
}

void ZmqTransport::add_endpoint(int id, const std::string& endpoint, const std::string& key) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  endpoints_[id] = endpoint;
  if (!key.empty()) keys_[id] = key;
}

void ZmqTransport::send(int peer, OutMessage message) {
  send_to_each({peer}, message);  // one peer: the checksum is computed on the comm thread (flush)
}

void ZmqTransport::send_to_each(const std::vector<int>& peers, const OutMessage& message) {
  OutMessage m = message;
  m.header.sender = static_cast<uint32_t>(rank());
  m.header.payload_bytes = static_cast<uint32_t>(m.bytes());
  bool all_unchecked = true;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    for (int peer : peers) {
      auto it = endpoints_.find(peer);
      if (it == endpoints_.end() || peer == rank()) throw Error("transport", "cannot send to peer " + std::to_string(peer));
      all_unchecked = all_unchecked && sends_unchecked(m.header, it->second);
    }
  }
  // One checksum serves every copy (identical headers) — except where the values are lent (single
  // copy): a lent chunk's values carry no checksum, so one is computed on the comm thread only for
  // a copy that goes over the socket after all (a link whose lending was refused). Nor where every
  // copy goes unchecked (flush).
  const bool lent = options_.single_copy && is_vector_kind(m.header.kind) && m.header.payload_bytes > 0;
  m.checksum_ready = peers.size() > 1 && !lent && !all_unchecked;
  if (m.checksum_ready) m.header.checksum = message_checksum(m.header, m.data, m.header.payload_bytes);
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    for (int peer : peers) queue_.emplace_back(peer, m);
  }
  wake();
}

std::optional<InMessage> ZmqTransport::receive(const MatchKey& key, Clock::time_point deadline) {
  const auto start = Clock::now();
  // A lent chunk's values are copied here, on the consumer's thread (or left in the lender's shared
  // region for it to fold in place); a refused one comes again.
  std::optional<InMessage> m;
  do m = mailbox_.take(key, deadline);
  while (m && m->lent && !copy_lent(*m, true));
  wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  return m;
}

std::string ZmqTransport::endpoint_of(int peer) const { return endpoint_of_id(peer); }

std::string ZmqTransport::last_known_endpoint(int peer) const {
  const std::string ep = endpoint_of_id(peer);
  if (!binds_any_port(ep)) return ep;
  std::lock_guard<std::mutex> lock(peers_mutex_);
  auto dialled = dialled_.find(peer);
  return dialled == dialled_.end() ? ep : dialled->second;
}

std::string ZmqTransport::endpoint_of_id(int peer) const {
  std::string ep;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    auto it = endpoints_.find(peer);
    if (it == endpoints_.end()) return "?";
    ep = it->second;
  }
  if (binds_any_port(ep) && !options_.rendezvous_dir.empty())
    if (std::optional<std::string> published = read_published(options_.rendezvous_dir, peer, options_.run_id))
      ep = *published;
  return ep;
}

TransportStats ZmqTransport::stats() const {
  TransportStats s;
  s.bytes_sent = bytes_sent_;
  s.bytes_received = bytes_received_;
  s.bytes_lent = bytes_lent_;
  s.bytes_mapped = bytes_mapped_;
  s.messages_dropped = dropped_;
  s.connections_refused = connections_refused_;
  s.wait_seconds = wait_ns_ * 1e-9;
  s.heartbeats_sent = heartbeats_sent_;
  s.view_messages_sent = view_messages_sent_;
  s.view_bytes_sent = view_bytes_sent_;
  s.seconds_up = std::chrono::duration<double>(Clock::now() - started_).count();
  return s;
}

void ZmqTransport::comm_main(std::promise<std::string> bound) {
  bool announced = false;
  try {
    // With CURVE, the ZAP handler must be bound before any socket asks it.
    std::optional<zmq::socket_t> zap;
    const bool curve = !options_.curve_secret.empty();
    if (curve) {
      zap.emplace(context_, zmq::socket_type::rep);
      zap->set(zmq::sockopt::linger, 0);
      zap->bind("inproc://zeromq.zap.01");
    }
    zmq::socket_t router(context_, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    if (curve) {
      router.set(zmq::sockopt::curve_server, true);
      router.set(zmq::sockopt::curve_secretkey, options_.curve_secret);
      router.set(zmq::sockopt::zap_domain, "gossip");
    }
    // No router_handover: a second connection claiming a connected peer's identity is refused,
    // so a rogue cannot take over a neighbour's pipe (and lose its messages) by naming it.
    router.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.chunk_bytes + 4096));
    router.set(zmq::sockopt::rcvhwm, 4096);
    set_connection_heartbeats(router);
    std::string ep = rank() >= 0 ? options_.endpoints[rank()] : options_.bind;
    const bool any_port = binds_any_port(ep);
    if (any_port && rank() < 0) {
      ep = ep.substr(0, ep.size() - 1) + "*";  // a joiner tells its endpoint in the join request
    } else if (any_port) {
      if (options_.rendezvous_dir.empty())
        throw Error("peer " + std::to_string(rank()), "endpoint " + ep + " uses port 0 but no rendezvous directory was given");
      ep = ep.substr(0, ep.size() - 1) + "*";
    }
    if (ep.rfind("ipc://", 0) == 0) {  // the socket's directory may not exist yet
      std::error_code ignored;
      fs::create_directories(fs::path(ep.substr(6)).parent_path(), ignored);
      // ZeroMQ unlinks an existing socket file before it binds, which would silently take the
      // endpoint from a live peer (a second run of the same YAML): refuse while one answers.
      if (ipc_path_has_listener(ep.substr(6)))
        throw Error("peer " + std::to_string(rank()), "cannot bind " + ep + ": another process is listening on it");
    }
    const std::string named = ep;  // by a host name: listened for on every interface, known by the name
    if (!any_port) ep = listen_address(ep);
    try {
      router.bind(ep);
    } catch (const zmq::error_t& e) {
      throw Error("peer " + std::to_string(rank()), "cannot bind " + ep + ": " + e.what());
    }
    const std::string actual = router.get(zmq::sockopt::last_endpoint);
    takes_unchecked_ = keeps_bytes_intact(actual);  // a loopback bind is reached from this host only
    if (any_port && rank() >= 0) publish_endpoint(options_.rendezvous_dir, rank(), actual, options_.run_id);
    bound.set_value(ep != named ? named : actual);
    announced = true;
    std::optional<ConnectionGuard> guard;
    if (!curve && options_.max_unverified_connections > 0)
      guard.emplace(context_, router, options_.max_unverified_connections,
                    std::chrono::duration_cast<ConnectionGuard::Clock::duration>(
                        std::chrono::duration<double>(options_.unverified_idle_s)));
    guard_ = guard ? &*guard : nullptr;
    comm_loop(router, zap ? &*zap : nullptr);
    guard_ = nullptr;
  } catch (...) {
    if (!announced) bound.set_exception(std::current_exception());
    else mailbox_.fail(std::current_exception());
  }
}

// ZMTP heartbeats on every connection of an elastic peer: a connection that carries nothing for
// the heartbeat timeout is closed by ZeroMQ. Without them a connection whose other end vanished
// in a partition (its close lost with the packets) stays open on the ROUTER, still holding the
// neighbour's identity, and the neighbour's next connection under that identity is not read.
void ZmqTransport::set_connection_heartbeats(zmq::socket_t& socket) {
  if (!options_.elastic || options_.heartbeat_s <= 0) return;
  // A ping every third of the timeout is enough to notice within it; more only costs messages.
  const double interval_s = std::max(options_.heartbeat_s, options_.dead_after_s / 3);
  socket.set(zmq::sockopt::heartbeat_ivl, std::max(1, static_cast<int>(interval_s * 1000)));
  socket.set(zmq::sockopt::heartbeat_timeout, std::max(1, static_cast<int>(options_.dead_after_s * 1000)));
}

bool ZmqTransport::connect(Link& link, int peer) {
  if (link.dealer) return true;
  std::string ep = endpoint_of_id(peer);
  if (binds_any_port(ep)) {
    {
      if (link.first_wait == Clock::time_point{}) link.first_wait = Clock::now();
      if (Clock::now() - link.first_wait > std::chrono::duration<double>(options_.timeout_s)) {
        std::string stale;
        read_published(options_.rendezvous_dir, peer, options_.run_id, &stale);
        throw Error("peer " + std::to_string(rank()), "peer " + std::to_string(peer) + " did not publish its endpoint in " +
                                                          options_.rendezvous_dir + " within " +
                                                          number_text(options_.timeout_s) + " s" +
                                                          (stale.empty() ? "" : " (ignored: " + stale + ")"));
      }
      return false;  // not started yet; retried on the next loop turn
    }
  }
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::routing_id, "r" + std::to_string(rank()));
  dealer.set(zmq::sockopt::linger, static_cast<int>(options_.linger_s * 1000));
  dealer.set(zmq::sockopt::sndhwm, 4096);
  // Queue only onto a finished connection: until then messages wait in our own queue, where a
  // heartbeat to a peer that is gone can be dropped at shutdown instead of lingering in ZeroMQ.
  dealer.set(zmq::sockopt::immediate, true);
  set_connection_heartbeats(dealer);
  if (!options_.curve_secret.empty()) {
    std::string key;
    {
      std::lock_guard<std::mutex> lock(peers_mutex_);
      auto it = keys_.find(peer);
      if (it != keys_.end()) key = it->second;
    }
    if (key.empty()) throw Error("peer " + std::to_string(rank()), "no public key for peer " + std::to_string(peer));
    dealer.set(zmq::sockopt::curve_serverkey, key);
    dealer.set(zmq::sockopt::curve_publickey, options_.curve_public);
    dealer.set(zmq::sockopt::curve_secretkey, options_.curve_secret);
  }
  try {
    dealer.connect(ep);
  } catch (const zmq::error_t& e) {
    // An endpoint ZeroMQ refuses (they are checked where they enter, accepts_endpoint and the
    // config, so this is a gap in those checks): the link's messages are dropped, and said so,
    // rather than the comm thread ending with the exception and the peer going silent.
    log("peer ", rank(), ": cannot dial peer ", peer, " at ", escape_for_log(ep), " (", e.what(),
        "): its queued messages are dropped");
    link.pending.clear();
    return false;
  }
  link.dealer = std::move(dealer);
  link.dialled = ep;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    dialled_[peer] = ep;
  }
  return true;
}

// Sends as much of the link's queue as the socket takes without blocking; true when empty.
bool ZmqTransport::flush(Link& link, int peer) {
  if (!connect(link, peer)) return link.pending.empty();
  while (!link.pending.empty()) {
    OutMessage& m = link.pending.front();
    m.header.payload_bytes = static_cast<uint32_t>(m.bytes());
    if (options_.single_copy && !link.lend_refused && is_vector_kind(m.header.kind) && m.header.payload_bytes > 0) {
      if (!send_lent(link, m)) return false;
      link.pending.pop_front();
      continue;
    }
    // The options' reference to the owner, held around the checksum's read of the buffer, puts
    // that read before the owner's release in the reference count's release sequence, so a
    // sender waiting for the release (SendGuard) sees it happen-before, also to TSan.
    if (!send_frames(*link.dealer, m.header, m.data, m.header.payload_bytes,
                     {nullptr, m.checksum_ready, m.owner, sends_unchecked(m.header, link.dialled)}))
      return false;
    bytes_sent_ += kHeaderBytes + m.header.payload_bytes;
    link.pending.pop_front();
  }
  return true;
}

// Takes over what the training thread queued (sends, a new id, dropped join connections) and
// returns the join requests to send.
std::deque<ZmqTransport::PendingJoin> ZmqTransport::take_queued() {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  if (relink_) {  // a new id (a rejoin): links carry the old one, suspicions are of the old view
    relink_ = false;
    for (auto& [id, link] : links_)
      if (link.dealer) link.dealer->set(zmq::sockopt::linger, 0);
    links_.clear();
    suspected_.clear();
    watch_since_ = Clock::now();
  }
  while (!queue_.empty()) {
    const int peer = queue_.front().first;
    const Header& h = queue_.front().second.header;
    if (h.kind == MessageKind::kView) {  // ours
      ++view_messages_sent_;
      view_bytes_sent_ += kHeaderBytes + queue_.front().second.bytes();
      if (h.epoch >= epoch_) note_view_change(Clock::now(), h.epoch);
    }
    if (!suspected_[peer]) links_[peer].pending.push_back(std::move(queue_.front().second));
    queue_.pop_front();
  }
  std::deque<PendingJoin> joins;
  joins.swap(joins_);
  if (forget_joins_) {
    forget_joins_ = false;
    for (zmq::socket_t& d : join_dealers_) d.set(zmq::sockopt::linger, 0);
    join_dealers_.clear();
  }
  return joins;
}

void ZmqTransport::comm_loop(zmq::socket_t& router, zmq::socket_t* zap) {
  Clock::time_point stop_deadline{};
  for (;;) {
    std::vector<zmq::pollitem_t> items;
    items.push_back({router.handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
    items.push_back({zap ? zap->handle() : nullptr, zap ? 0 : -1, static_cast<short>(zap ? ZMQ_POLLIN : 0), 0});
    bool unconnected_backlog = false;
    for (auto& [id, link] : links_) {
      const short events = static_cast<short>((link.pending.empty() ? 0 : ZMQ_POLLOUT) | (link.lent.empty() ? 0 : ZMQ_POLLIN));
      if (events == 0) continue;
      if (link.dealer) {
        items.push_back({link.dealer->handle(), 0, events, 0});
      } else {
        unconnected_backlog = true;
      }
    }
    int wait_ms = unconnected_backlog ? 20 : options_.elastic && options_.heartbeat_s > 0 ? 50 : 200;
    if (lent_answers_->waiting() > 0) wait_ms = std::min(wait_ms, 10);  // copy_waiting_lent's turn
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms));
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof(count));
    }
    send_join_requests(take_queued());
    copy_waiting_lent(Clock::now() - std::chrono::milliseconds(50));  // not taken within 50 ms
    send_lent_answers(router);
    if (zap && (items[2].revents & ZMQ_POLLIN)) answer_zap(*zap);
    if (items[0].revents & ZMQ_POLLIN) receive_all(router);
    if (guard_) {
      guard_->read_events(drop_log_, log_prefix(), Clock::now());
      connections_refused_ = guard_->refused();
    }
    drop_log_.tick(log_prefix(), Clock::now());
    if (!stop_) {
      watch_members(Clock::now());
      recheck_rendezvous(Clock::now());
    } else {
      for (auto& [id, link] : links_)  // heartbeats need not outlive us (a dead member's never leave)
        std::erase_if(link.pending, [](const OutMessage& m) { return m.header.kind == MessageKind::kHeartbeat; });
    }
    bool all_sent = true;
    for (auto& [id, link] : links_) {
      if (!link.lent.empty()) read_lent_done(link, id);
      if (!link.pending.empty()) all_sent &= flush(link, id);
      all_sent &= link.lent.empty();  // a reader still to copy needs this process alive
    }
    if (stop_) {
      if (stop_deadline == Clock::time_point{})
        stop_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.linger_s));
      // stop_ is set after the last send() (and the last copy of a lent chunk), so once it is seen
      // an empty queue is final; a send (or a lent chunk's answer) queued after this turn's drain
      // is still picked up on the next turn.
      bool queued;
      {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queued = !queue_.empty();
      }
      queued = queued || lent_answers_->pending();
      if ((all_sent && !queued) || Clock::now() > stop_deadline) break;
    }
  }
  // Dealers close here with their linger, so bytes already queued still leave.
  links_.clear();
  join_dealers_.clear();
}

}  // namespace gossip::peer
