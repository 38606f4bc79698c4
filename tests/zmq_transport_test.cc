#include "transport/zmq/zmq_transport.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "algorithms/collectives.h"
#include "algorithms/gossip_step.h"
#include "membership/view_transport.h"
#include "process_util.h"
#include "transport/rendezvous.h"
#include "zmq_fixture.h"

namespace gossip::peer {
namespace {

namespace fs = std::filesystem;

class ZmqTransportTest : public ZmqFixture {
 protected:
  // Four elastic members heartbeating every 50 ms, each watched by `watchers` others.
  // Their settings digest is `digest`, member 3's `digest_of_3`.
  std::vector<std::unique_ptr<ZmqTransport>> elastic_four(double dead_after_s, int watchers,
                                                          double unverified_idle_s = 60, uint64_t digest = 0,
                                                          uint64_t digest_of_3 = 0) {
    std::vector<std::unique_ptr<ZmqTransport>> t;
    for (int r = 0; r < 4; ++r) {
      ZmqTransportOptions o = options(r, 4);
      o.elastic = true;
      o.heartbeat_s = 0.05;
      o.dead_after_s = dead_after_s;
      o.watchers = watchers;
      o.unverified_idle_s = unverified_idle_s;
      o.settings_digest = r == 3 ? digest_of_3 : digest;
      t.push_back(std::make_unique<ZmqTransport>(o));
    }
    return t;
  }
};

// Sends h with `payload` from peer `sender`, its checksum computed (then xor-ed with `spoil`).
void send_raw(zmq::socket_t& s, Header h, const std::vector<float>& payload, uint32_t spoil = 0, uint32_t sender = 1) {
  h.sender = sender;
  h.payload_bytes = static_cast<uint32_t>(payload.size() * 4);
  h.checksum = message_checksum(h, payload.data(), h.payload_bytes) ^ spoil;
  uint8_t head[kHeaderBytes];
  encode_header(h, head);
  s.send(zmq::buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
  s.send(zmq::buffer(payload.data(), payload.size() * 4), zmq::send_flags::none);
}

TEST(WatchSets, EachMemberHasItsWatchersAndBeatsAConstantNumber) {
  const std::vector<int> ids = {4, 9, 2, 7, 11, 30, 5, 8};  // view order, not sorted
  std::map<int, std::vector<int>> watched_by;
  for (int self : ids) {
    const WatchSets w = watch_sets(ids, self, 3);
    EXPECT_EQ(w.beat.size(), 3u);
    EXPECT_EQ(w.watch.size(), 3u);
    for (int id : w.beat) watched_by[id].push_back(self);
    // Whom I beat watches me: the relation is the same seen from both ends.
    for (int id : w.beat) {
      const std::vector<int> theirs = watch_sets(ids, id, 3).watch;
      EXPECT_NE(std::find(theirs.begin(), theirs.end(), self), theirs.end()) << self << " -> " << id;
    }
  }
  for (int id : ids) EXPECT_EQ(watched_by[id].size(), 3u) << id;
  EXPECT_EQ(watch_sets(ids, 4, 3).beat, (std::vector<int>{9, 2, 7}));
  EXPECT_EQ(watch_sets(ids, 4, 3).watch, (std::vector<int>{8, 5, 30}));  // wraps around
  // Few members, or watchers 0: everyone watches everyone.
  EXPECT_EQ(watch_sets({1, 2, 3, 4}, 2, 3).watch, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(watch_sets(ids, 7, 0).beat.size(), 7u);
  EXPECT_TRUE(watch_sets(ids, 99, 3).beat.empty());  // not a member
}

// Indirect probes go first to the target's other watchers (they hear its heartbeats), then to
// the rest of the view, rotating; never to the asker or the target.
TEST(ProbeHelpers, TheTargetsOtherWatchersFirstThenOthersRotating) {
  const std::vector<int> ids = {3, 8, 5, 30, 4, 9, 2, 7};
  // 4 heartbeats 9, 2, 7: asked by 9 about 4, the others of those are 2 and 7.
  const std::vector<int> h = probe_helpers(ids, 9, 4, 3, 3, 0);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(std::vector<int>(h.begin(), h.begin() + 2), (std::vector<int>{2, 7}));
  EXPECT_TRUE(h[2] != 9 && h[2] != 4 && h[2] != 2 && h[2] != 7) << h[2];
  std::set<int> thirds;
  for (uint64_t turn = 0; turn < 16; ++turn) {
    const std::vector<int> t = probe_helpers(ids, 9, 4, 3, 3, turn);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(std::set<int>(t.begin(), t.end()).size(), 3u);
    for (int id : t) EXPECT_TRUE(id != 9 && id != 4) << id;
    thirds.insert(t[2]);
  }
  EXPECT_GE(thirds.size(), 3u);  // the third helper moves on from turn to turn
  EXPECT_TRUE(probe_helpers(ids, 9, 4, 3, 0, 0).empty());
  EXPECT_TRUE(probe_helpers(ids, 9, 99, 3, 3, 0).empty());          // not a member
  EXPECT_EQ(probe_helpers({1, 2, 3}, 1, 2, 3, 3, 0), (std::vector<int>{3}));  // only one other there is
  EXPECT_EQ(probe_helpers({1, 2}, 1, 2, 3, 3, 0).size(), 0u);
}

// Four elastic members, each watched by two (3 is watched by 0 and 1). While all live nobody is
// suspected; once 3 is gone, its watchers ask around (1 answers how long ago it heard from 3, 2
// pings it) and still suspect it dead_after_s after its last heartbeat: an answer carries an
// age, so it never keeps a dead member alive. 2, which does not watch 3, suspects nobody.
TEST_F(ZmqTransportTest, ACrashedMemberIsSuspectedOnTimeDespiteIndirectProbes) {
  std::vector<std::unique_ptr<ZmqTransport>> t = elastic_four(0.6, 2);
  const auto suspicion = [&](int r, double wait_s) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
    auto m = t[r]->mailbox().take_any({MessageKind::kSuspect}, deadline);
    return m ? static_cast<int>(m->header.sender) : -1;
  };
  EXPECT_EQ(suspicion(0, 1.5), -1);  // everyone hears everyone it watches
  const auto crashed = Clock::now();
  t[3].reset();
  EXPECT_EQ(suspicion(0, 3), 3);
  const double after_s = std::chrono::duration<double>(Clock::now() - crashed).count();
  EXPECT_EQ(suspicion(1, 1), 3);
  EXPECT_GE(after_s, 0.4);
  EXPECT_LE(after_s, 3);
  EXPECT_EQ(suspicion(2, 0.5), -1);
  EXPECT_GT(t[0]->stats().heartbeats_sent, 0u);
}

// Each elastic member links to every other, but heartbeats only its watchers: with one watcher
// each of four members sends nothing on two of its three links. The first beat on every new
// link keeps those connections verified, so the other end's guard (idle limit 0.3 s here, 60 s
// by default) closes none of them; without it each would be closed and dialled again.
TEST_F(ZmqTransportTest, LinksThatCarryNoHeartbeatsAreNotClosedAsIdle) {
  std::vector<std::unique_ptr<ZmqTransport>> t = elastic_four(5, 1, 0.3);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(t[r]->stats().connections_refused, 0u) << "peer " << r;
    EXPECT_EQ(t[r]->mailbox().take_any({MessageKind::kSuspect}, Clock::now()), std::nullopt) << "peer " << r;
  }
}

// A member whose heartbeats carry another digest of the shared settings (started with another
// YAML) is named in what the others report of it, and it names them; members alike are not, and
// a digest of 0 (none) is not compared.
TEST_F(ZmqTransportTest, AMemberStartedWithOtherSettingsIsNamedFromItsHeartbeats) {
  const std::string other = "its heartbeats say it was started with other shared settings";
  for (uint64_t digest_of_3 : {99, 0}) {
    std::vector<std::unique_ptr<ZmqTransport>> t = elastic_four(5, 0, 60, 42, digest_of_3);
    const std::vector<std::pair<int, int>> pairs = {{0, 3}, {2, 3}, {3, 0}, {0, 1}, {1, 2}};
    auto named = [&](int r, int about) { return t[r]->dropped_from(about).find(other) != std::string::npos; };
    auto differ = [&](int r, int about) { return digest_of_3 != 0 && (r == 3 || about == 3); };
    auto settled = [&] {
      return std::all_of(pairs.begin(), pairs.end(), [&](auto p) { return named(p.first, p.second) == differ(p.first, p.second); });
    };
    if (digest_of_3 != 0)  // until every pair says it (beats every 50 ms)
      for (int i = 0; i < 200 && !settled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    else  // alike: 0.4 s of beats, and none says it
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    for (const auto& [r, about] : pairs)
      EXPECT_EQ(named(r, about), differ(r, about)) << r << " about " << about << ", digest of 3: " << digest_of_3;
  }
}

TEST_F(ZmqTransportTest, ChunkedVectorsTravelBothWays) {
  ZmqTransport a(options(0, 2)), b(options(1, 2));
  EXPECT_NE(a.bound_endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  auto data = std::make_shared<std::vector<float>>(100000);
  for (size_t i = 0; i < data->size(); ++i) (*data)[i] = float(i);
  send_vector(a, 1, {MessageKind::kGossip, 3, 0}, data->data(), data, 0, data->size(), data->size(), 0, 4096);
  send_vector(b, 0, {MessageKind::kGossip, 3, 0}, data->data(), data, 0, 10, data->size(), 0.5, 4096);
  std::vector<float> got(data->size(), -1);
  receive_vector(b, 0, {MessageKind::kGossip, 3, 0}, 0, got.size(), got.size(), 5.0, [&](size_t i, const float* v, size_t c) {
    std::copy(v, v + c, got.begin() + i);
  });
  EXPECT_EQ(got, *data);
  double w = receive_vector(a, 1, {MessageKind::kGossip, 3, 0}, 0, 10, data->size(), 5.0, [](size_t, const float*, size_t) {}).weight;
  EXPECT_EQ(w, 0.5);
  EXPECT_GE(a.stats().bytes_sent, 400000u);
}

// Over real sockets, however the values come, GossipStep's outlier and NaN screen sees them (no
// in-process shortcut involved): with algorithm.checksum: always the receiver checks each chunk's
// checksum and the same pass gives the chunk's sum of squares; over loopback by default the chunks
// come unchecked and the fold's own pass scans them; with single copy there is no checksum either
// and the fold scans the values it reads from the lender's region. A NaN chunk is not mixed in.
TEST_F(ZmqTransportTest, GossipScreensOutliersHoweverTheValuesCome) {
  for (const char* mode : {"checksum always", "unchecked", "single copy"}) {
    const bool single_copy = std::string(mode) == "single copy";
    const int n = 3;
    const size_t dim = 4000, chunk = 1000;
    std::vector<std::vector<float>> x(n, std::vector<float>(dim)), out(n, std::vector<float>(dim));
    for (int r = 0; r < n; ++r) std::fill(x[r].begin(), x[r].end(), float(r + 1));
    std::fill(x[1].begin() + 1000, x[1].begin() + 2000, 1e4f);  // peer 1's second chunk
    x[1][2500] = std::nanf("");                                  // and its third
    std::vector<uint64_t> lent(n);
    std::vector<std::thread> peers;
    for (int r = 0; r < n; ++r)
      peers.emplace_back([&, r] {
        ZmqTransportOptions o = options(r, n);
        o.single_copy = single_copy;
        o.checksum_always = std::string(mode) == "checksum always";
        ZmqTransport t(o);
        GossipStep step(t, topology::Graph{topology::Kind::kRing, 0, {}}, dim, chunk, 10.0, 10.0);
        step.step(0, x[r].data(), out[r].data());
        lent[r] = t.stats().bytes_lent;
      });
    for (auto& p : peers) p.join();
    for (int r = 0; r < n; ++r) fs::remove(dir_ / ("peer-" + std::to_string(r)));  // the next run's rendezvous
    for (int r : {0, 2}) {
      const float self = float(r + 1), other = r == 0 ? 3.0f : 1.0f;
      EXPECT_FLOAT_EQ(out[r][0], 2.0f) << mode;
      EXPECT_FLOAT_EQ(out[r][1500], (2 * self + other) / 3) << mode << ": peer 1's outlier chunk is not mixed in";
      EXPECT_FLOAT_EQ(out[r][2999], (2 * self + other) / 3) << mode << ": peer 1's NaN chunk is not mixed in";
      EXPECT_FLOAT_EQ(out[r][3999], 2.0f) << mode;
    }
    if (testing::process_vm_readv_works()) {
      EXPECT_EQ(lent[0], single_copy ? 2 * dim * 4 : 0) << "both neighbours copied all of peer 0's chunks";
    }
  }
}

// bf16 gossip over real sockets: chunks of an odd number of 2-byte values (payloads that are not
// whole floats), scanned as bf16 by the receiver, half the bytes of f32.
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
  zmq::socket_t rogue = claims_to_be_peer_1(ctx, a.bound_endpoint());
  rogue.send(zmq::str_buffer("hello, not a gossip peer"), zmq::send_flags::none);
  Header h;
  h.kind = MessageKind::kGossip;
  h.total_floats = 2;
  Header old_version = h;
  old_version.version = 0;
  send_raw(rogue, old_version, {1, 2});
  Header huge = h;
  huge.total_floats = 1ull << 40;  // another model shape
  send_raw(rogue, huge, {1, 2});
  send_raw(rogue, h, {7, 8});
  std::vector<float> got;
  receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 2, 2, 5.0,
                 [&](size_t, const float* v, size_t c) { got.assign(v, v + c); });
  EXPECT_EQ(got, (std::vector<float>{7, 8}));
  EXPECT_EQ(a.stats().messages_dropped, 3u);
  const std::string dropped = a.dropped_from(1);
  EXPECT_NE(dropped.find("3 messages from connection 'r1'"), std::string::npos) << dropped;
  EXPECT_NE(dropped.find("another model shape"), std::string::npos) << dropped;
}

// A neighbour whose messages are all dropped here (here: a peer set to algorithm.checksum:
// always, sent chunks without a payload checksum) is named as set up differently, with why, in
// the error its missing vector ends in, not only as dead; through a ViewTransport too, whose
// ranks are not the ids. A neighbour that sent nothing is named as dead, hung or far behind.
TEST_F(ZmqTransportTest, AMissingVectorsErrorSaysWhyWhatCameWasDropped) {
  ZmqTransportOptions o = options(0, 3);
  o.checksum_always = true;
  ZmqTransport a(o);
  zmq::context_t ctx;
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::routing_id, "r2");
  rogue.set(zmq::sockopt::linger, 0);
  rogue.connect(a.bound_endpoint());
  Header h;
  h.kind = MessageKind::kGossip;
  h.total_floats = 2;
  h.flags = kFlagUnchecked;
  send_raw(rogue, h, {1, 2}, 0, 2);
  send_raw(rogue, h, {3, 4}, 0, 2);
  View v;
  v.members = {{0, a.bound_endpoint(), ""}, {2, "tcp://127.0.0.1:1", ""}};  // rank 1 is id 2
  v.next_id = 3;
  ViewTransport view(a, v, 0);
  auto error_of = [&](Transport& t, int peer) -> std::string {
    try {
      receive_vector(t, peer, {MessageKind::kGossip, 0, 0}, 0, 2, 2, 0.5, [](size_t, const float*, size_t) {});
    } catch (const PeerLost& e) {
      return e.what();
    }
    return "no error";
  };
  for (int i = 0; i < 200 && a.stats().messages_dropped < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string why = "2 messages from connection 'r2' were dropped here, the last: a vector chunk without a payload "
                          "checksum (this peer has algorithm.checksum: always)";
  for (const std::string& e : {error_of(a, 2), error_of(view, 1)}) {
    EXPECT_NE(e.find("no gossip message from peer "), std::string::npos) << e;
    EXPECT_NE(e.find("or set up differently: " + why), std::string::npos) << e;
  }
  EXPECT_EQ(view.dropped_from(1), a.dropped_from(2));
  EXPECT_EQ(view.dropped_from(0), "");
  EXPECT_EQ(view.dropped_from(5), "") << "outside the view";
  const std::string silent = error_of(a, 1);
  EXPECT_NE(silent.find("the neighbour is dead, hung or far behind"), std::string::npos) << silent;
  EXPECT_EQ(silent.find("set up differently"), std::string::npos) << silent;
}

// Over loopback a vector's chunks go with a checksum of their header alone (kFlagUnchecked) and
// anything else (text) with its full checksum; with algorithm.checksum: always, every payload is
// checksummed. Seen from a raw socket standing in for the neighbour.
TEST_F(ZmqTransportTest, OverLoopbackVectorChunksGoWithoutAPayloadChecksum) {
  for (bool always : {false, true}) {
    zmq::context_t ctx;
    zmq::socket_t raw(ctx, zmq::socket_type::router);
    raw.set(zmq::sockopt::linger, 0);
    raw.bind("tcp://127.0.0.1:*");
    ZmqTransportOptions o = options(0, 2);
    o.endpoints[1] = raw.get(zmq::sockopt::last_endpoint);
    o.checksum_always = always;
    ZmqTransport a(o);
    auto data = std::make_shared<std::vector<float>>(3000, 0.25f);
    send_vector(a, 1, {MessageKind::kGossip, 0, 0}, data->data(), data, 0, 3000, 3000, 0, 1000);
    raw.set(zmq::sockopt::rcvtimeo, 5000);
    std::map<MessageKind, int> unchecked, checked;
    for (int m = 0; m < 4; ++m) {
      if (m == 3)  // (a proposal drops what is still queued of its epoch: sent once the chunks are out)
        a.send(1, text_message(MessageKind::kView, 0, 1, 0, std::make_shared<std::string>(pad_text("a proposal"))));
      std::vector<zmq::message_t> frames(3);
      for (auto& f : frames) ASSERT_TRUE(raw.recv(f)) << "message " << m;
      Header h;
      ASSERT_EQ(validate_message(frames[1].data(), frames[1].size(), frames[2].data(), frames[2].size(), &h),
                std::nullopt);
      ++(h.flags & kFlagUnchecked ? unchecked : checked)[h.kind];
      uint8_t head[kHeaderBytes];
      encode_header(h, head);
      EXPECT_EQ(h.checksum == crc32c(head, kHeaderBytes - 4), (h.flags & kFlagUnchecked) != 0)
          << "an unchecked chunk's checksum is its header's";
    }
    EXPECT_EQ(unchecked[MessageKind::kGossip], always ? 0 : 3);
    EXPECT_EQ(checked[MessageKind::kGossip], always ? 3 : 0);
    EXPECT_EQ(checked[MessageKind::kView], 1);
  }
}

// A chunk without a payload checksum is taken over loopback (its values unchecked, its header
// checked), and dropped by a peer set to algorithm.checksum: always, or when its header does not
// match its checksum; a checked chunk sent after them arrives.
TEST_F(ZmqTransportTest, AnUncheckedChunkIsTakenOnlyWhereTheLinkKeepsBytesIntact) {
  for (bool always : {false, true}) {
    ZmqTransportOptions o = options(0, 2);
    o.checksum_always = always;
    ZmqTransport a(o);
    zmq::context_t ctx;
    zmq::socket_t rogue = claims_to_be_peer_1(ctx, a.bound_endpoint());
    Header h;
    h.kind = MessageKind::kGossip;
    h.total_floats = 2;
    Header unchecked = h;
    unchecked.flags = kFlagUnchecked;
    send_raw(rogue, unchecked, {1, 2}, 1);  // its header does not match its checksum
    send_raw(rogue, unchecked, {3, 4});
    send_raw(rogue, h, {5, 6});
    std::vector<float> got;
    receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 2, 2, 5.0,
                   [&](size_t, const float* v, size_t c) { got.assign(v, v + c); });
    EXPECT_EQ(got, (std::vector<float>{always ? 5.0f : 3.0f, always ? 6.0f : 4.0f})) << always;
    EXPECT_EQ(a.stats().messages_dropped, always ? 2u : 1u) << always;
  }
}

// A neighbour bound to port 0 whose rendezvous file is gone (its process ended) is still named
// in messages by the endpoint it was reached at, not by the port-0 endpoint of the YAML.
TEST_F(ZmqTransportTest, AGoneNeighbourIsDescribedWhereItWasReached) {
  ZmqTransport a(options(0, 2));
  std::string reached;
  {
    ZmqTransport b(options(1, 2));
    reached = b.bound_endpoint();
    EXPECT_EQ(a.describe(1), "peer 1 (" + reached + ")") << "from its rendezvous file";
    auto data = std::make_shared<std::vector<float>>(4, 1.0f);
    send_vector(a, 1, {MessageKind::kGossip, 0, 0}, data->data(), data, 0, 4, 4, 0, 4096);
    receive_vector(b, 0, {MessageKind::kGossip, 0, 0}, 0, 4, 4, 5.0, [](size_t, const float*, size_t) {});
  }
  fs::remove(rendezvous_path(dir_.string(), 1));
  EXPECT_EQ(a.endpoint_of(1), "tcp://127.0.0.1:0");
  EXPECT_EQ(a.describe(1), "peer 1 (" + reached + ")");
  EXPECT_EQ(a.describe(0), "peer 0 (" + a.bound_endpoint() + ")") << "never dialled: its own file";
}

TEST_F(ZmqTransportTest, MissingNeighbourEndpointIsAClearError) {
  ZmqTransportOptions o = options(0, 2);
  o.timeout_s = 0.2;
  ZmqTransport a(o);
  auto data = std::make_shared<std::vector<float>>(4, 1.0f);
  send_vector(a, 1, {MessageKind::kGossip, 0, 0}, data->data(), data, 0, 4, 4, 0, 4096);
  try {
    receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 4, 4, 2.0, [](size_t, const float*, size_t) {});
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
// With single copy, the sender's shutdown waits until the lent chunks are copied.
TEST_F(ZmqTransportTest, MessagesSentJustBeforeShutdownArrive) {
  for (int trial = 0; trial < 20; ++trial) {
    ZmqTransportOptions oa = options(0, 2), ob = options(1, 2);
    oa.single_copy = ob.single_copy = trial % 2 == 1;
    auto b = std::make_unique<ZmqTransport>(ob);
    {
      ZmqTransport a(oa);
      // Released buffers are overwritten, so a copy made after the release would show it.
      std::shared_ptr<std::vector<float>> data(new std::vector<float>(300000, float(trial)), [](std::vector<float>* v) {
        std::fill(v->begin(), v->end(), -1.0f);
        delete v;
      });
      send_vector(a, 1, {MessageKind::kAllGather, uint64_t(trial), 0}, data->data(), data, 0, data->size(), data->size(), 0, 1 << 14);
    }
    size_t got = 0, wrong = 0;
    receive_vector(*b, 0, {MessageKind::kAllGather, uint64_t(trial), 0}, 0, 300000, 300000, 5.0,
                   [&](size_t, const float* v, size_t c) {
                     got += c;
                     wrong += static_cast<size_t>(std::count_if(v, v + c, [&](float f) { return f != float(trial); }));
                   });
    EXPECT_EQ(got, 300000u) << "trial " << trial;
    EXPECT_EQ(wrong, 0u) << "trial " << trial;
    std::filesystem::remove(dir_ / "peer-0");
    std::filesystem::remove(dir_ / "peer-1");
  }
}

}  // namespace
}  // namespace gossip::peer
