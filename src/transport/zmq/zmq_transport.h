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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "common/endpoint.h"
#include "common/shared_memory.h"
#include "transport/zmq/connection_guard.h"
#include "transport/control_handler.h"
#include "transport/zmq/drop_log.h"
#include "transport/zmq/lent_answers.h"
#include "transport/mailbox.h"
#include "transport/membership_port.h"

namespace gossip::peer {

// The transport's settings. Those that come from the YAML carry the YAML's names (algorithm.
// chunk_bytes, timeout_s, heartbeat_s, dead_after_s, single_copy; max_unverified_connections).
struct ZmqTransportOptions {
  int rank = 0;                        // this peer's id; -1: a joiner, whose id comes later (set_self_id)
  std::vector<std::string> endpoints;  // the initial peers' endpoints by id; tcp://host:0 = via rendezvous
  std::string bind;                    // a joiner's own endpoint (tcp://host:0 picks a free port)
  std::string rendezvous_dir;          // where port-0 peers publish the endpoint they bound
  std::string run_id;                  // names this run in rendezvous files ("" = unknown; see rendezvous.h)
  uint64_t max_total_floats = ~0ull;   // largest vector a message may belong to (model size + slack)
  size_t chunk_bytes = kChunkBytes;    // larger payload frames are refused by ZeroMQ itself (as algorithm.chunk_bytes)
  double timeout_s = 60;               // how long to wait for a neighbour to publish its endpoint
  double linger_s = 5;                 // at shutdown, how long unsent (or unread lent) messages may still go out
  // Without CurveZMQ: connections that have not sent a valid message yet beyond this many are
  // closed (ConnectionGuard); 0 = no cap. With CurveZMQ the ZAP handler refuses strangers.
  size_t max_unverified_connections = 256;
  double unverified_idle_s = 60;  // and one that has sent nothing valid for this long is closed too
  // Single-copy transfers (algorithm.single_copy, see LentRef in wire_format.h): vector chunks are
  // lent to neighbours, which copy them out of this process's memory; and chunks lent to this
  // peer are copied (off: refused, and the sender sends them again over the socket).
  bool single_copy = false;
  // Elastic membership (gossip-peer): heartbeats, suspicions and membership interrupts. Off, the
  // transport is a plain fixed set of peers (benchmarks, tests of the data plane).
  bool elastic = false;
  // Failure detection (see watch_sets): a member's `watchers` successors in the view get a
  // heartbeat from it this often, and a member its watchers have not heard from for dead_after_s
  // is reported as suspected dead (heartbeat_s 0 = no heartbeats). While a view change runs, every
  // member heartbeats and watches every other (the change's own messages are all-to-all anyway).
  double heartbeat_s = 0.25;
  double dead_after_s = 3;
  int watchers = 3;  // 0: every member watches every other all the time
  // Before a watched member is suspected, this many others are asked whether they hear from it
  // (see probe_helpers and ProbeTag): one cut link does not evict a live member. 0 = none.
  int indirect_probes = 3;
  // CurveZMQ (all empty = plain TCP/IPC): this peer's key pair, every peer's public key by rank,
  // and the public keys allowed to connect (checked by a ZAP handler on the comm thread). Keys of
  // peers that join later come with the view (set_members).
  std::string curve_public, curve_secret;
  std::vector<std::string> peer_public_keys;
  std::vector<std::string> allowed_keys;
  // Vector chunks' values carry no checksum where the link keeps them intact by itself (see
  // kFlagUnchecked: loopback, ipc://, CurveZMQ); true: every payload sent is checksummed, and an
  // unchecked one received is dropped (algorithm.checksum: always).
  bool checksum_always = false;
  // A digest of the settings every peer of the run must share (peer/config.h's shared_settings),
  // carried by each heartbeat beat (in its round). A member whose beats carry another one was
  // started with other settings: logged once, and named in the error its missing messages end in
  // (dropped_from). 0: none sent and none compared.
  uint64_t settings_digest = 0;
};

// Who watches whom in a view of `members` (ids in view order) when each member is watched by
// `watchers` others: member i heartbeats the `watchers` members after it in the order (cyclically)
// and watches the `watchers` before it. With watchers = 0 or at least members − 1, every member
// heartbeats and watches every other. Pure; `self` must be a member.
struct WatchSets {
  std::vector<int> beat, watch;
};
WatchSets watch_sets(const std::vector<int>& members, int self, int watchers);

// Whom `self` asks about `target` (indirect probes): up to k members, neither of them, first
// the target's other watchers (they hear its heartbeats anyway, so they answer at once), then
// others; `turn` rotates the choice from one ask to the next. Pure.
std::vector<int> probe_helpers(const std::vector<int>& members, int self, int target, int watchers, int k,
                               uint64_t turn);

// Keeps freed large blocks in the heap instead of returning them to the kernel: every received
// chunk is a fresh ZeroMQ allocation, and with glibc's default 128 KiB mmap threshold each would
// cost page faults and zeroing. Process-wide; programs call it once at start-up.
void tune_allocator_for_large_messages();

class ZmqTransport final : public MembershipPort {
 public:
  // Binds and starts the communication thread; throws gossip::Error if the bind fails.
  explicit ZmqTransport(ZmqTransportOptions options);
  ~ZmqTransport() override;  // flushes queued sends (bounded by linger_s), joins the thread
  ZmqTransport(const ZmqTransport&) = delete;
  ZmqTransport& operator=(const ZmqTransport&) = delete;

  // Ids, not ranks: an elastic run reaches peers through ViewTransport, which maps ranks to ids.
  int rank() const override { return self_id_; }
  int size() const override;  // one more than the largest id known
  void send(int peer, OutMessage message) override;
  void send_to_each(const std::vector<int>& peers, const OutMessage& message) override;
  std::optional<InMessage> receive(const MatchKey& key, Clock::time_point deadline) override;
  bool ready(const MatchKey& key) override { return mailbox_.ready(key); }
  std::string endpoint_of(int peer) const override;
  TransportStats stats() const override;
  std::string dropped_from(int peer) const override { return drops_by_member_.of(peer); }
  std::string last_known_endpoint(int peer) const override;

  const std::string& bound_endpoint() const { return bound_endpoint_; }
  // Control requests (status, snapshots) are answered by `handler` on the comm thread; until one
  // is set they are dropped. `handler` must outlive the transport.
  void set_control_handler(ControlHandler* handler) { control_ = handler; }
  // Largest vector a valid message may belong to; larger ones are dropped as another model shape.
  void set_max_total_floats(uint64_t n) { max_total_floats_ = n; }

  // Elastic membership (MembershipPort). When a rejoined member's id changes, every link is
  // made anew (connections carry the id) and its old suspicions are forgotten. set_members closes
  // links to anyone else, dropping what was queued for them. A join request goes over a one-off
  // "j<nonce>.<k>" connection; forget_join_requests closes them all at once (linger 0).
  void set_self_id(int id) override;
  void set_members(const std::vector<PeerAddress>& members, uint32_t epoch) override;
  void set_last_decision(uint32_t epoch, std::string text) override { decision_.set(epoch, std::move(text)); }
  void set_cut_off(uint32_t epoch) override { decision_.set_cut_off(epoch); }
  void add_endpoint(int id, const std::string& endpoint, const std::string& key) override;
  void send_join(const std::string& contact, const std::string& contact_key, const std::string& text,
                 uint64_t nonce) override;
  void forget_join_requests() override;
  std::string own_endpoint() const override { return bound_endpoint_; }
  // A joiner's endpoint this transport can dial: tcp:// or ipc://, well formed (peer_endpoint_problem),
  // so no join request can make a member's comm thread dial what ZeroMQ refuses.
  bool accepts_endpoint(const std::string& endpoint) const override { return !peer_endpoint_problem(endpoint); }
  std::string public_key() const override { return options_.curve_public; }
  Mailbox& mailbox() override { return mailbox_; }

 private:
  struct Link;
  void comm_main(std::promise<std::string> bound);
  void comm_loop(zmq::socket_t& router, zmq::socket_t* zap);
  void watch_members(Clock::time_point now);
  // Indirect probes (probe.cc): ask others about a member silent for `silent_s`; answer what
  // others ask (h.tag: ProbeTag); note a message straight from `id` (vouches to relay).
  void ask_about(int target, const std::vector<int>& members, double silent_s, Clock::time_point now);
  void answer_probe(const Header& h, Clock::time_point now);
  void compare_settings(int from, uint64_t digest);  // a beat's settings digest (see settings_digest)
  void note_heard(int id, Clock::time_point now);
  void queue_probe(int to, ProbeTag tag, int about, double age_s);
  // Queues a kHeartbeat (a beat, or a probe: tag, about, age) to `to` unless `max_pending`
  // messages already wait on that link; counted in heartbeats_sent.
  void queue_heartbeat(int to, size_t max_pending, ProbeTag tag = kBeat, int about = 0, double age_s = 0);
  bool is_member(int id) const;
  double fresh_word_s() const;
  double ask_after_s() const;
  // A view-change message of `epoch` (this one or a later one) was sent or received: a change
  // runs, and every member is watched until none has been seen for a while (changing()). The
  // data of epochs up to `epoch` still queued here is dropped: every receiver discards it after
  // the change, and a send to a member that died unseen by us would otherwise hold its buffer
  // (and the training thread, waiting for the buffer's release) until we suspected it too.
  void note_view_change(Clock::time_point now, uint32_t epoch);
  bool changing(Clock::time_point now) const;
  void recheck_rendezvous(Clock::time_point now);
  std::string endpoint_of_id(int id) const;
  void answer_zap(zmq::socket_t& zap);
  void receive_all(zmq::socket_t& router);
  std::optional<std::string> judge(const std::string& who, std::vector<zmq::message_t>& frames, Header* h);
  void accept(zmq::socket_t& router, const zmq::message_t& identity, const Header& h,
              std::vector<zmq::message_t>& frames);
  void answer_control(zmq::socket_t& router, const zmq::message_t& identity, const Header& request,
                      const zmq::message_t& payload);
  bool flush(Link& link, int peer);
  bool send_lent(Link& link, OutMessage& m);
  // Single copy (single_copy.cc): whether `sender`'s memory may be read (comm thread: the
  // cookie check, once per lender); the copy of a lent chunk's values (false: refused, the lender
  // sends them again) — on the training thread in receive(), or on the comm thread for chunks
  // waiting long or when a view change begins (copy_waiting_lent); the answers those copies owe, sent.
  bool lendable(int sender, const LentRef& ref);
  // in_place: a chunk in a shared region of the lender is left there for the consumer to fold
  // (InMessage::shared), else copied out.
  bool copy_lent(InMessage& m, bool in_place);
  std::shared_ptr<const shm::SharedMapping> shared_region(int lender, const InMessage::Lent& lent, size_t bytes);
  void copy_waiting_lent(Clock::time_point arrived_by);
  void send_lent_answers(zmq::socket_t& router);
  void answer_lent(zmq::socket_t& router, const zmq::message_t& identity, int lender, uint64_t token, bool copied);
  void read_lent_done(Link& link, int peer);
  void lent_done(Link& link, int peer, const Header& h);
  bool connect(Link& link, int peer);
  void set_connection_heartbeats(zmq::socket_t& socket);
  std::string log_prefix() const;  // "peer ID: ", for the drop log
  // Whether bytes sent to `endpoint` arrive intact without a checksum of ours (kFlagUnchecked):
  // for a sender the neighbour's endpoint, for a receiver its own (every sender dialled it).
  bool keeps_bytes_intact(const std::string& endpoint) const;
  // Whether `h` goes to `endpoint` as an unchecked chunk: a vector's values, to such a link.
  bool sends_unchecked(const Header& h, const std::string& endpoint) const;
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
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, bytes_lent_{0}, dropped_{0}, heartbeats_sent_{0};
  std::atomic<uint64_t> view_messages_sent_{0}, view_bytes_sent_{0};
  const Clock::time_point started_ = Clock::now();
  std::atomic<int64_t> wait_ns_{0};
  DropLog drop_log_;                          // comm thread only: escaped, rate-limited drop lines
  DropsByMember drops_by_member_;             // why the last message from each member was dropped
  ConnectionGuard* guard_ = nullptr;          // comm thread only: set while comm_loop runs (null: no cap)
  bool takes_unchecked_ = false;              // comm thread only: keeps_bytes_intact(what it bound)
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<int> self_id_;
  std::atomic<uint32_t> epoch_{0};
  LastDecision decision_;
  mutable std::mutex peers_mutex_;
  std::map<int, std::string> endpoints_;        // guarded by peers_mutex_: every id ever known
  std::vector<int> members_;                    // guarded by peers_mutex_: the current members
  uint64_t members_version_ = 0;                // guarded by peers_mutex_
  struct PendingJoin {
    std::string contact, contact_key, text;
    uint64_t nonce;
  };
  std::deque<PendingJoin> joins_;               // guarded by queue_mutex_
  std::deque<PendingJoin> take_queued();
  void send_join_requests(const std::deque<PendingJoin>& joins);
  bool relink_ = false;                         // guarded by queue_mutex_: our id changed
  bool forget_joins_ = false;                   // guarded by queue_mutex_: close the join dealers
  std::map<int, std::string> keys_;             // guarded by peers_mutex_: public keys by id
  // Comm thread only:
  std::map<int, Link> links_;
  std::map<int, Clock::time_point> heard_;      // last message from each id
  std::map<int, bool> suspected_;
  // Indirect probes: when we last asked about each silent member (and whether we logged it this
  // time it fell silent), and, as a helper, the members we pinged for others: when, and who asked.
  struct Asked {
    Clock::time_point at{};
    bool vouched = false;  // someone else heard from it since it fell silent to us (logged once)
  };
  std::map<int, Asked> asked_;
  struct Relay {
    Clock::time_point pinged{};
    std::set<int> askers;
  };
  std::map<int, Relay> relay_;
  uint64_t probe_turn_ = 0;
  Clock::time_point watch_since_{};
  Clock::time_point change_seen_{};             // last view-change message of this epoch or later
  Clock::time_point change_since_{};            // when the view change being watched was first seen
  Clock::time_point last_beat_{};               // when the members we watch for last got a heartbeat
  Clock::time_point last_change_beat_{};        // when the others last got one, in a view change
  Clock::time_point last_watch_{};              // the last turn of watch_members (stall detection)
  Clock::time_point last_recheck_{};            // the last read of the rendezvous files
  std::map<int, std::string> dialled_;          // the endpoint each id was last dialled at: written by
                                                // the comm thread under peers_mutex_, read by it without
                                                // and by other threads (last_known_endpoint) under it
  uint64_t seen_members_version_ = ~0ull;
  std::vector<zmq::socket_t> join_dealers_;
  uint64_t join_connections_ = 0;               // numbers the join dealers' identities
  // Single copy: a random value in this process's memory that a reader checks (LentRef::cookie);
  // the cookie of each sender whose pid was checked, and the senders that cannot be read.
  const uint64_t cookie_;
  std::map<int, std::pair<uint64_t, uint64_t>> readable_;  // id → (pid, cookie) checked
  std::map<int, bool> unreadable_;
  // Lenders' shared regions mapped (single_copy.cc: the latest few of each lender), and lenders
  // whose regions could not be mapped (their values are copied out instead).
  std::mutex mappings_mutex_;
  std::map<int, std::deque<std::shared_ptr<const shm::SharedMapping>>> mappings_;  // guarded
  std::map<int, bool> unmappable_;                                                  // guarded
  std::atomic<uint64_t> bytes_mapped_{0};
  std::shared_ptr<LentAnswers> lent_answers_;  // set once the eventfd exists; thread-safe
  std::thread thread_;
};

}  // namespace gossip::peer
