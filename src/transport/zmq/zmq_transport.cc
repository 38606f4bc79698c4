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

}  // namespace

void tune_allocator_for_large_messages() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

// One neighbour we send to; lives on the comm thread only.
struct ZmqTransport::Link {
  std::optional<zmq::socket_t> dealer;
  std::deque<OutMessage> pending;
  Clock::time_point first_wait{};
  std::map<uint64_t, OutMessage> lent;  // single copy: chunks the neighbour has yet to copy, by token
  uint64_t next_token = 1;
  bool lend_refused = false;            // the neighbour could not read us: send over the socket
  std::string dialled;                  // the endpoint the dealer connected to
};

namespace {

uint64_t random_cookie() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(::getpid()) << 17);
}

// Copies `bytes` from `address` in process `pid` into `dst`; an error text, or nullopt.
std::optional<std::string> read_process_memory(uint64_t pid, uint64_t address, void* dst, size_t bytes) {
  iovec local{dst, bytes};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address)), bytes};
  const ssize_t got = ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(bytes)) return std::nullopt;
  if (got < 0) return std::string("process_vm_readv: ") + std::strerror(errno);
  return "process_vm_readv copied " + std::to_string(got) + " of " + std::to_string(bytes) + " bytes";
}

}  // namespace

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

void ZmqTransport::send_join(const std::string& contact, const std::string& contact_key, const std::string& text,
                             uint64_t nonce) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    joins_.push_back({contact, contact_key, text, nonce});
  }
  wake();
}

void ZmqTransport::forget_join_requests() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    joins_.clear();
    forget_joins_ = true;
  }
  wake();
}

void ZmqTransport::send(int peer, OutMessage message) {
  bool known;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    known = endpoints_.count(peer) != 0;
  }
  if (!known || peer == rank()) throw Error("transport", "cannot send to peer " + std::to_string(peer));
  message.header.sender = static_cast<uint32_t>(rank());
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.emplace_back(peer, std::move(message));
  }
  wake();
}

std::optional<InMessage> ZmqTransport::receive(const MatchKey& key, Clock::time_point deadline) {
  const auto start = Clock::now();
  auto m = mailbox_.take(key, deadline);
  wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  return m;
}

std::string ZmqTransport::endpoint_of(int peer) const { return endpoint_of_id(peer); }

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
  s.messages_dropped = dropped_;
  s.connections_refused = connections_refused_;
  s.wait_seconds = wait_ns_ * 1e-9;
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
    router.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.max_chunk_bytes + 4096));
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
    try {
      router.bind(ep);
    } catch (const zmq::error_t& e) {
      throw Error("peer " + std::to_string(rank()), "cannot bind " + ep + ": " + e.what());
    }
    const std::string actual = router.get(zmq::sockopt::last_endpoint);
    if (any_port && rank() >= 0) publish_endpoint(options_.rendezvous_dir, rank(), actual, options_.run_id);
    bound.set_value(actual);
    announced = true;
    std::optional<ConnectionGuard> guard;
    if (!curve && options_.max_unverified_connections > 0)
      guard.emplace(context_, router, options_.max_unverified_connections);
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
  if (!options_.elastic || options_.heartbeat_interval_s <= 0) return;
  // A ping every third of the timeout is enough to notice within it; more only costs messages.
  const double interval_s = std::max(options_.heartbeat_interval_s, options_.heartbeat_timeout_s / 3);
  socket.set(zmq::sockopt::heartbeat_ivl, std::max(1, static_cast<int>(interval_s * 1000)));
  socket.set(zmq::sockopt::heartbeat_timeout, std::max(1, static_cast<int>(options_.heartbeat_timeout_s * 1000)));
}

bool ZmqTransport::connect(Link& link, int peer) {
  if (link.dealer) return true;
  std::string ep = endpoint_of_id(peer);
  if (binds_any_port(ep)) {
    {
      if (link.first_wait == Clock::time_point{}) link.first_wait = Clock::now();
      if (Clock::now() - link.first_wait > std::chrono::duration<double>(options_.connect_timeout_s)) {
        std::string stale;
        read_published(options_.rendezvous_dir, peer, options_.run_id, &stale);
        throw Error("peer " + std::to_string(rank()), "peer " + std::to_string(peer) + " did not publish its endpoint in " +
                                                          options_.rendezvous_dir + " within " +
                                                          std::to_string(options_.connect_timeout_s) + " s" +
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
  dealer.connect(ep);
  link.dealer = std::move(dealer);
  link.dialled = ep;
  dialled_[peer] = ep;
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
    const void* data = m.data;
    // Holding (then dropping) our own reference around the checksum's read of the buffer puts
    // that read before the owner's release in the reference count's release sequence, so a
    // sender waiting for the release (SendGuard) sees it happen-before, also to TSan.
    Owner reading = m.owner;
    if (!m.checksum_ready) m.header.checksum = message_checksum(m.header, data, m.header.payload_bytes);
    uint8_t head[kHeaderBytes];
    encode_header(m.header, head);
    // ZeroMQ applies the high-water mark at the first frame only, so once the header is
    // accepted the payload frame is too.
    auto sent = link.dealer->send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!sent) return false;
    // Zero-copy: ZeroMQ reads straight from the shared buffer and drops our reference when done.
    auto* keep = new Owner(std::move(m.owner));
    zmq::message_t payload(const_cast<void*>(data), m.header.payload_bytes,
                           [](void*, void* hint) { delete static_cast<Owner*>(hint); }, keep);
    link.dealer->send(payload, zmq::send_flags::none);

    bytes_sent_ += kHeaderBytes + m.header.payload_bytes;
    link.pending.pop_front();
    reading.reset();
  }
  return true;
}

// Sends a reference to m's values instead of the values, and keeps m (its owner holds the buffer)
// until the neighbour says it copied them. m's own header stays as it was, for a resend.
bool ZmqTransport::send_lent(Link& link, OutMessage& m) {
  Header h = m.header;
  h.flags = kFlagLent;
  LentRef ref;
  ref.pid = static_cast<uint64_t>(::getpid());
  ref.address = reinterpret_cast<uintptr_t>(m.data);
  ref.token = link.next_token;
  ref.cookie_address = reinterpret_cast<uintptr_t>(&cookie_);
  ref.cookie = cookie_;
  uint8_t frame[kLentRefBytes];
  encode_lent_ref(ref, frame);
  h.checksum = message_checksum(h, frame, kLentRefBytes);
  uint8_t head[kHeaderBytes];
  encode_header(h, head);
  if (!link.dealer->send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
    return false;
  link.dealer->send(zmq::const_buffer(frame, kLentRefBytes), zmq::send_flags::none);
  bytes_sent_ += kHeaderBytes + h.payload_bytes;  // the values do move (the reader copies them)
  link.lent.emplace(link.next_token++, std::move(m));
  return true;
}

// The values of a lent chunk from `sender`, copied out of its memory; null when they cannot be
// (then the sender is told, and sends them again over the socket).
std::shared_ptr<void> ZmqTransport::copy_lent(int sender, const Header& h, const LentRef& ref) {
  if (unreadable_[sender]) return nullptr;
  std::optional<std::string> problem;
  if (!options_.single_copy) {
    problem = "single_copy is off on this peer";
  } else {
    auto known = readable_.find(sender);
    if (known == readable_.end() || known->second != std::make_pair(ref.pid, ref.cookie)) {
      uint64_t cookie = 0;
      problem = read_process_memory(ref.pid, ref.cookie_address, &cookie, sizeof(cookie));
      if (!problem && cookie != ref.cookie)
        problem = "pid " + std::to_string(ref.pid) + " here is another process: another host or pid namespace";
      if (!problem) readable_[sender] = {ref.pid, ref.cookie};
    }
  }
  std::shared_ptr<void> values;
  if (!problem) {
    values.reset(std::malloc(std::max<size_t>(h.payload_bytes, 1)), std::free);
    if (!values) throw Error("peer " + std::to_string(rank()), "out of memory for a " + std::to_string(h.payload_bytes) + "-byte chunk");
    problem = read_process_memory(ref.pid, ref.address, values.get(), h.payload_bytes);
  }
  if (!problem) return values;
  unreadable_[sender] = true;
  log("peer ", rank(), ": cannot copy peer ", sender, "'s values out of its memory (", *problem,
      "): they come over the socket from now on");
  return nullptr;
}

// Reads the lent-done answers waiting on a link's dealer (those sent back on our connection: see
// answer_lent).
void ZmqTransport::read_lent_done(Link& l, int peer) {
  for (;;) {
    zmq::message_t head;
    if (!l.dealer->recv(head, zmq::recv_flags::dontwait)) return;
    std::vector<zmq::message_t> rest;
    while (l.dealer->get(zmq::sockopt::rcvmore)) {
      rest.emplace_back();
      (void)l.dealer->recv(rest.back(), zmq::recv_flags::none);
    }
    Header h;
    std::optional<std::string> problem;
    if (rest.size() != 1) problem = std::to_string(rest.size() + 1) + " frames (expected header + payload)";
    else problem = validate_message(head.data(), head.size(), rest[0].data(), rest[0].size(), &h);
    if (!problem && h.kind != static_cast<uint16_t>(MessageKind::kLentDone)) problem = "a " + kind_name(h.kind) + " message as an answer";
    if (problem) {
      ++dropped_;
      drop_log_.dropped(log_prefix(), "r" + std::to_string(peer), "an answer: " + *problem,
                        Clock::now());
      continue;
    }
    lent_done(l, peer, h);
  }
}

// A neighbour copied (tag 0) or could not copy (tag 1) the chunk we lent it as token h.round.
void ZmqTransport::lent_done(Link& l, int peer, const Header& h) {
  auto it = l.lent.find(h.round);
  if (it == l.lent.end()) {
    // After a refusal every later token was already queued again; anything else is not ours.
    if (!l.lend_refused) {
      ++dropped_;
      log("peer ", rank(), ": dropped a lent-done from peer ", peer, " for token ", h.round, ", never lent");
    }
    return;
  }
  if (h.tag == 0) {
    bytes_lent_ += it->second.bytes();
    l.lent.erase(it);  // releases the buffer
    return;
  }
  // Refused: the reader refuses every later token too (in order), so all from this one on go
  // again over the socket, ahead of anything not sent yet, keeping each vector's chunk order.
  if (!l.lend_refused) log("peer ", rank(), ": peer ", peer, " cannot copy out of this peer's memory: sending it the values");
  l.lend_refused = true;
  std::deque<OutMessage> again;
  for (auto j = it; j != l.lent.end(); j = l.lent.erase(j)) again.push_back(std::move(j->second));
  l.pending.insert(l.pending.begin(), std::make_move_iterator(again.begin()), std::make_move_iterator(again.end()));
}

// Tells a lender that its chunk `token` was copied, or could not be (it then sends the values).
// Through our own dealer to it, like any message (it lingers at shutdown, so an answer written
// just before this peer stops still arrives); back on the connection the reference came on when
// this peer does not know the lender's endpoint yet (a joiner before its welcome is read) or
// `lender` is -1 (a dropped reference: whoever sent it, not the id it claims, gets the answer).
void ZmqTransport::answer_lent(zmq::socket_t& router, const zmq::message_t& identity, int lender, uint64_t token,
                               bool copied) {
  OutMessage m;
  m.header.kind = static_cast<uint16_t>(MessageKind::kLentDone);
  m.header.sender = static_cast<uint32_t>(rank());
  m.header.epoch = epoch_;
  m.header.round = token;
  m.header.tag = copied ? 0 : 1;
  m.data = &kMagic;  // zero values; any valid pointer
  bool known = false;
  if (lender >= 0) {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    known = endpoints_.count(lender) != 0;
  }
  if (lender >= 0 && suspected_[lender]) return;
  // (An endpoint never published, as a rogue could name, would have the connect wait for it.)
  const auto link = links_.find(lender);
  const bool connected = link != links_.end() && link->second.dealer;
  if (known && rank() >= 0 && (connected || !binds_any_port(endpoint_of_id(lender)))) {
    links_[lender].pending.push_back(std::move(m));
    return;
  }
  static const uint8_t kNoPayload = 0;
  m.header.checksum = message_checksum(m.header, &kNoPayload, 0);
  uint8_t head[kHeaderBytes];
  encode_header(m.header, head);
  // ROUTER drops what it cannot route (a lender that went away).
  if (!router.send(zmq::const_buffer(identity.data(), identity.size()), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
    return;
  router.send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
  router.send(zmq::const_buffer(&kNoPayload, 0), zmq::send_flags::none);
}

void ZmqTransport::receive_all(zmq::socket_t& router) {
  for (;;) {
    zmq::message_t identity;
    if (!router.recv(identity, zmq::recv_flags::dontwait)) return;
    std::vector<zmq::message_t> frames;
    while (router.get(zmq::sockopt::rcvmore)) {
      frames.emplace_back();
      (void)router.recv(frames.back(), zmq::recv_flags::none);
    }
    const std::string who = identity.to_string();
    std::optional<std::string> problem;
    Header h;
    if (frames.size() != 2) {
      problem = std::to_string(frames.size()) + " frames (expected header + payload)";
    } else {
      problem = validate_header(frames[0].data(), frames[0].size(), frames[1].size(), &h);
      if (!problem && h.kind == static_cast<uint16_t>(MessageKind::kControlRequest)) {
        if (!checksum_matches(h, frames[1].data(), frames[1].size())) {
          problem = "control request with a bad checksum";
        } else {
          answer_control(router, identity, h, frames[1]);
          continue;
        }
      } else if (!problem && h.kind == static_cast<uint16_t>(MessageKind::kControlReply)) {
        problem = "a control reply (peers never ask)";
      } else if (!problem && h.kind == static_cast<uint16_t>(MessageKind::kJoin)) {
        if (who.rfind("j", 0) != 0) {
          problem = "a join request from a member connection";
        } else if (h.payload_bytes > 4096) {
          problem = "a join request of " + std::to_string(h.payload_bytes) + " bytes";
        } else if (!options_.curve_secret.empty()) {
          // The key the joiner claims must be the one it proved it holds (ZAP's user id).
          const char* user = frames[0].gets("User-Id");
          const std::string text(static_cast<const char*>(frames[1].data()), frames[1].size());
          if (!user || text.find(std::string(" ") + user) == std::string::npos)
            problem = "a join request claiming a key it did not authenticate with";
        }
      } else if (!problem) {
        if (h.sender >= (1u << 24) || who != "r" + std::to_string(h.sender))
          problem = "sender field " + std::to_string(h.sender) + " does not match the connection";
        else if (h.total_floats > max_total_floats_)
          problem = "vector of " + std::to_string(h.total_floats) + " floats (this run's model has at most " +
                    std::to_string(max_total_floats_.load()) + "): another model shape?";
        else if ((h.flags & kFlagLent) && h.payload_bytes > options_.max_chunk_bytes)
          problem = "a lent chunk of " + std::to_string(h.payload_bytes) + " bytes (chunks are at most " +
                    std::to_string(options_.max_chunk_bytes) + ")";
        else if ((h.flags & kFlagLent) && !checksum_matches(h, frames[1].data(), frames[1].size()))
          problem = "a lent chunk reference with a bad checksum";
        else if (h.kind == static_cast<uint16_t>(MessageKind::kLentDone) && !checksum_matches(h, frames[1].data(), frames[1].size()))
          problem = "a lent-done with a bad checksum";
      }
    }
    if (problem) {
      ++dropped_;
      drop_log_.dropped(log_prefix(), who, *problem, Clock::now());
      // A dropped lent chunk is refused, so that its lender does not wait for it: it sends the
      // values over the socket, to be judged (and dropped) like any other message.
      if (frames.size() == 2 && frames[0].size() == kHeaderBytes && frames[1].size() == kLentRefBytes &&
          (decode_header(static_cast<const uint8_t*>(frames[0].data())).flags & kFlagLent))
        answer_lent(router, identity, -1, decode_lent_ref(static_cast<const uint8_t*>(frames[1].data())).token, false);
      continue;
    }
    if (guard_) guard_->verified(frames[0].get(ZMQ_SRCFD));
    const auto kind = static_cast<MessageKind>(h.kind);
    if (kind != MessageKind::kJoin) heard_[static_cast<int>(h.sender)] = Clock::now();
    if (kind == MessageKind::kHeartbeat) continue;
    if (kind == MessageKind::kLentDone) {
      auto link = links_.find(static_cast<int>(h.sender));
      if (link != links_.end()) lent_done(link->second, link->first, h);  // else gone, and its lent chunks with it
      continue;
    }
    // A late proposal of a change that is over: neither queued nor allowed to interrupt (an
    // interrupt with nothing to agree on would abandon a collective for nothing).
    if (kind == MessageKind::kView && h.epoch < epoch_) {
      std::optional<OutMessage> decision = decision_.answer(h);
      bool known;
      {
        std::lock_guard<std::mutex> lock(peers_mutex_);
        known = endpoints_.count(static_cast<int>(h.sender)) != 0;
      }
      if (decision && known) {  // tell the late one what was decided (even that it is gone)
        decision->header.sender = static_cast<uint32_t>(rank());
        links_[static_cast<int>(h.sender)].pending.push_back(std::move(*decision));
      }
      continue;
    }
    bytes_received_ += kHeaderBytes + h.payload_bytes;

    InMessage in;
    in.header = h;
    in.count = h.payload_bytes / element_bytes(h.dtype);
    in.verified = false;  // the payload checksum is checked by the consumer (receive_vector)
    if (h.flags & kFlagLent) {
      const LentRef ref = decode_lent_ref(static_cast<const uint8_t*>(frames[1].data()));
      std::shared_ptr<void> values = copy_lent(static_cast<int>(h.sender), h, ref);
      answer_lent(router, identity, static_cast<int>(h.sender), ref.token, values != nullptr);
      if (!values) continue;  // it comes again over the socket
      in.header.flags = 0;
      in.data = static_cast<const float*>(values.get());
      in.owner = std::move(values);
      in.verified = true;  // copied by the kernel from the sender's own buffer: no checksum to check
    } else if (reinterpret_cast<uintptr_t>(frames[1].data()) % alignof(float) == 0) {
      auto payload = std::make_shared<zmq::message_t>(std::move(frames[1]));
      in.data = static_cast<const float*>(payload->data());
      in.owner = payload;
    } else {
      // Small messages may sit unaligned inside ZeroMQ's receive batch: copy those.
      auto copy = std::make_shared<std::vector<float>>((h.payload_bytes + sizeof(float) - 1) / sizeof(float));
      if (h.payload_bytes) std::memcpy(copy->data(), frames[1].data(), h.payload_bytes);
      in.data = copy->data();
      in.owner = copy;
    }
    mailbox_.put(std::move(in));
    // A proposal from another member interrupts the training thread wherever it waits (a join
    // request waits for the next step: it may yet be refused).
    if (options_.elastic && kind == MessageKind::kView) mailbox_.interrupt();
  }
}

// Heartbeats every member and reports one that has been silent too long (once), dropping what
// was queued for it so that zero-copy buffers are released.
void ZmqTransport::watch_members(Clock::time_point now) {
  std::vector<int> members;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    members = members_;
    if (seen_members_version_ != members_version_) {
      seen_members_version_ = members_version_;
      watch_since_ = now;
      for (auto it = links_.begin(); it != links_.end();) {
        if (std::find(members_.begin(), members_.end(), it->first) == members_.end()) {
          if (it->second.dealer) it->second.dealer->set(zmq::sockopt::linger, 0);
          it = links_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  // A link to a non-member (a late proposer answered with our decision, a refused joiner) is
  // closed once its queue is empty; the dealer's linger still delivers what it took. Left open,
  // its identity (ours) would stay taken on the ROUTER at that endpoint, and a later connection
  // of ours there (to a peer that rejoined on it) would be parked by ZeroMQ and never read.
  for (auto it = links_.begin(); it != links_.end();) {
    const bool member = std::find(members.begin(), members.end(), it->first) != members.end();
    if (!member && it->second.pending.empty() && it->second.lent.empty()) it = links_.erase(it);
    else ++it;
  }
  if (!options_.elastic || options_.heartbeat_interval_s <= 0 || rank() < 0) return;
  // This thread did not run for longer than the heartbeat timeout (the process was paused,
  // swapped out or starved): the silence it measured is its own. What was queued meanwhile has
  // just been read; every member gets a whole timeout again before it is suspected.
  if (last_watch_ != Clock::time_point{} && now - last_watch_ > std::chrono::duration<double>(options_.heartbeat_timeout_s)) {
    log("peer ", rank(), ": this peer was stalled for ", std::chrono::duration<double>(now - last_watch_).count(),
        " s (paused or starved): members get ", options_.heartbeat_timeout_s, " s to be heard from before any is suspected");
    watch_since_ = now;
  }
  last_watch_ = now;
  const bool beat = now - last_beat_ > std::chrono::duration<double>(options_.heartbeat_interval_s);
  if (beat) last_beat_ = now;
  for (int id : members) {
    if (id == rank() || suspected_[id]) continue;
    Link& link = links_[id];
    if (beat && link.pending.size() < 2) {
      OutMessage m;
      m.header.kind = static_cast<uint16_t>(MessageKind::kHeartbeat);
      m.header.sender = static_cast<uint32_t>(rank());
      m.data = &kMagic;  // zero values; any valid pointer
      link.pending.push_back(std::move(m));
    }
    auto h = heard_.find(id);
    const bool ever = h != heard_.end() && h->second >= watch_since_ - std::chrono::hours(1);
    const Clock::time_point last = ever ? std::max(h->second, watch_since_) : watch_since_;
    // Never heard of: at start-up peers may come up slowly (connect_timeout_s); a member added by
    // a view change is already running, so it gets only a few seconds more than the timeout.
    const double grace = seen_members_version_ == 0 ? options_.connect_timeout_s : options_.heartbeat_timeout_s + 5;
    const double limit = ever ? options_.heartbeat_timeout_s : std::max(options_.heartbeat_timeout_s, grace);
    if (now - last > std::chrono::duration<double>(limit)) {
      suspected_[id] = true;
      const auto dialled = dialled_.find(id);  // where we reached it (the file may say otherwise now)
      log("peer ", rank(), ": no word from peer ", id, " (", dialled != dialled_.end() ? dialled->second : endpoint_of_id(id),
          ") for ", limit, " s: suspected dead");
      if (link.dealer) link.dealer->set(zmq::sockopt::linger, 0);
      links_.erase(id);
      InMessage note;
      note.header.kind = static_cast<uint16_t>(MessageKind::kSuspect);
      note.header.sender = static_cast<uint32_t>(id);
      mailbox_.put(std::move(note));
      mailbox_.interrupt();
    }
  }
}

// A neighbour that binds port 0 may have been dialled through a file an earlier run left (on
// another host, where its process cannot be checked): once a second, its file is read again, and
// when it names another endpoint the link is made anew there. Nothing is lost: with `immediate`
// a message only leaves our queue onto a finished connection.
void ZmqTransport::recheck_rendezvous(Clock::time_point now) {
  if (options_.rendezvous_dir.empty() || now - last_recheck_ < std::chrono::seconds(1)) return;
  last_recheck_ = now;
  for (auto& [id, link] : links_) {
    if (!link.dealer || !link.lent.empty()) continue;
    std::string configured;
    {
      std::lock_guard<std::mutex> lock(peers_mutex_);
      auto it = endpoints_.find(id);
      if (it != endpoints_.end()) configured = it->second;
    }
    if (!binds_any_port(configured)) continue;
    const std::optional<std::string> now_published = read_published(options_.rendezvous_dir, id, options_.run_id);
    if (!now_published || *now_published == link.dialled) continue;
    log("peer ", rank(), ": peer ", id, " now publishes ", *now_published, " (was dialled at ", link.dialled,
        "): connecting there");
    link.dealer->set(zmq::sockopt::linger, 0);
    link.dealer.reset();
  }
}

void ZmqTransport::answer_control(zmq::socket_t& router, const zmq::message_t& identity, const Header& request,
                                  const zmq::message_t& payload) {
  ControlHandler* handler = control_;
  ControlReply reply;
  if (handler) {
    reply = handler->handle(request.tag, std::string(static_cast<const char*>(payload.data()), payload.size()));
  } else {
    reply.text = "{\"error\": \"peer is starting\"}";
  }
  std::string text = pad_text(reply.text);
  const void* data = reply.floats ? static_cast<const void*>(reply.values->data()) : text.data();
  const size_t bytes = reply.floats ? reply.values->size() * sizeof(float) : text.size();
  Header h;
  h.kind = static_cast<uint16_t>(MessageKind::kControlReply);
  h.sender = static_cast<uint32_t>(rank());
  h.round = request.round;
  h.tag = request.tag;
  h.payload_bytes = static_cast<uint32_t>(bytes);
  h.total_floats = bytes / sizeof(float);
  h.weight = reply.floats ? 1.0 : 0.0;
  h.checksum = message_checksum(h, data, bytes);
  uint8_t head[kHeaderBytes];
  encode_header(h, head);
  // A tool that went away is simply not answered: never block the comm thread on it.
  if (!router.send(zmq::const_buffer(identity.data(), identity.size()), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
    return;
  router.send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
  router.send(zmq::const_buffer(data, bytes), zmq::send_flags::none);
}

// ZAP (RFC 27): version, request id, domain, address, identity, mechanism, credentials.
void ZmqTransport::answer_zap(zmq::socket_t& zap) {
  std::vector<zmq::message_t> f;
  do {
    f.emplace_back();
    if (!zap.recv(f.back(), zmq::recv_flags::dontwait)) return;
  } while (zap.get(zmq::sockopt::rcvmore));
  if (f.size() < 6) return;
  bool allowed = false;
  std::string user_id;
  std::string why = "mechanism " + f[5].to_string();
  if (f[5].to_string() == "CURVE" && f.size() >= 7 && f[6].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(f[6].data()), 32);
    allowed = std::find(options_.allowed_keys.begin(), options_.allowed_keys.end(), std::string(z85)) !=
              options_.allowed_keys.end();
    why = "key " + std::string(z85) + " is not on the allow-list";
    user_id = z85;
  }
  if (!allowed)
    drop_log_.refused(log_prefix(),
                      "refused a connection from " + escape_for_log(f[3].to_string()) + ": " + why, Clock::now());
  zap.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  zap.send(f[1], zmq::send_flags::sndmore);
  zap.send(zmq::buffer(std::string(allowed ? "200" : "400")), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(std::string(allowed ? "OK" : "not allowed")), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(allowed ? user_id : std::string()), zmq::send_flags::sndmore);  // user id: the key
  zap.send(zmq::str_buffer(""), zmq::send_flags::none);
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
    const int wait_ms = unconnected_backlog ? 20 : options_.elastic && options_.heartbeat_interval_s > 0 ? 50 : 200;
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms));
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof(count));
    }
    std::deque<PendingJoin> joins;
    {
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
        if (!suspected_[peer]) links_[peer].pending.push_back(std::move(queue_.front().second));
        queue_.pop_front();
      }
      joins.swap(joins_);
      if (forget_joins_) {
        forget_joins_ = false;
        for (zmq::socket_t& d : join_dealers_) d.set(zmq::sockopt::linger, 0);
        join_dealers_.clear();
      }
    }
    for (const PendingJoin& j : joins) {  // a one-off connection per request
      const std::string json = pad_text(j.text);
      zmq::socket_t dealer(context_, zmq::socket_type::dealer);
      // One identity per connection: a rejoin sends one request through several tries, and the
      // ROUTER would park a second connection under an identity already in use, unread.
      dealer.set(zmq::sockopt::routing_id, "j" + std::to_string(j.nonce) + "." + std::to_string(join_connections_++));
      dealer.set(zmq::sockopt::linger, 1000);
      if (!options_.curve_secret.empty()) {
        dealer.set(zmq::sockopt::curve_serverkey, j.contact_key);
        dealer.set(zmq::sockopt::curve_publickey, options_.curve_public);
        dealer.set(zmq::sockopt::curve_secretkey, options_.curve_secret);
      }
      dealer.connect(j.contact);
      Header h;
      h.kind = static_cast<uint16_t>(MessageKind::kJoin);
      h.payload_bytes = static_cast<uint32_t>(json.size());
      h.total_floats = json.size() / sizeof(float);
      h.checksum = message_checksum(h, json.data(), json.size());
      uint8_t head[kHeaderBytes];
      encode_header(h, head);
      dealer.send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
      dealer.send(zmq::const_buffer(json.data(), json.size()), zmq::send_flags::none);
      join_dealers_.push_back(std::move(dealer));
    }
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
        std::erase_if(link.pending, [](const OutMessage& m) { return m.header.kind == static_cast<uint16_t>(MessageKind::kHeartbeat); });
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
      // stop_ is set after the last send(), so once it is seen an empty queue is final; a send
      // queued after this turn's drain is still picked up on the next turn.
      bool queued;
      {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queued = !queue_.empty();
      }
      if ((all_sent && !queued) || Clock::now() > stop_deadline) break;
    }
  }
  // Dealers close here with their linger, so bytes already queued still leave.
  links_.clear();
  join_dealers_.clear();
}

}  // namespace gossip::peer
