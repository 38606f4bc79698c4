// Single-copy transfers (transport/zmq/single_copy.cc): lent chunks, their copy on the reader's
// thread or, when it does not come for them, on its comm thread; refusals; forged references.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>
#include <zmq.hpp>

#include "algorithms/collectives.h"
#include "algorithms/gossip_step.h"
#include "common/error.h"
#include "common/shared_memory.h"
#include "process_util.h"
#include "zmq_fixture.h"
#include "transport/zmq/lent_answers.h"
#include "transport/zmq/zmq_transport.h"

namespace gossip::peer {
namespace {

namespace fs = std::filesystem;

class SingleCopyTest : public ZmqFixture {};

// Sends, as peer 1, a gossip message of `round` for 8 floats: the values, or (lent) a reference.
void send_as_peer_1(zmq::socket_t& s, uint64_t round, const void* payload, size_t bytes, bool lent) {
  Header h;
  h.kind = MessageKind::kGossip;
  h.sender = 1;
  h.round = round;
  h.total_floats = 8;
  h.payload_bytes = lent ? 32 : static_cast<uint32_t>(bytes);
  h.flags = lent ? kFlagLent : 0;
  h.checksum = message_checksum(h, payload, bytes);
  uint8_t head[kHeaderBytes];
  encode_header(h, head);
  s.send(zmq::buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
  s.send(zmq::buffer(payload, bytes), zmq::send_flags::none);
}

// Single copy: the receiver copies each chunk straight out of the sender's buffer, which the
// sender gets back (its guard released) only once the copy is made; the values are exact.
TEST_F(SingleCopyTest, SingleCopyChunksArriveExactlyAndAreCountedAsLent) {
  if (!testing::process_vm_readv_works()) GTEST_SKIP() << "process_vm_readv is not allowed on this machine";
  auto [oa, ob] = lending_pair();
  ZmqTransport a(oa), b(ob);
  std::vector<float> data(100003);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.5f - 7;
  for (uint64_t round = 0; round < 3; ++round) {
    SendGuard guard;
    send_vector(a, 1, {MessageKind::kGossip, round, 0}, data.data(), guard.owner(), 0, data.size(), data.size(), 0, 4096);
    std::vector<float> got(data.size(), -1);
    receive_vector(b, 0, {MessageKind::kGossip, round, 0}, 0, got.size(), got.size(), 5.0,
                   [&](size_t i, const float* v, size_t c) { std::copy(v, v + c, got.begin() + i); });
    guard.wait_released(5.0, "test");
    EXPECT_EQ(got, data) << "round " << round;
  }
  EXPECT_EQ(a.stats().bytes_lent, 3 * data.size() * 4);
  EXPECT_EQ(b.stats().bytes_received, 3 * (25 * kHeaderBytes + data.size() * 4));
  EXPECT_EQ(a.stats().messages_dropped + b.stats().messages_dropped, 0u);
}

// A chunk lent from a shared region (common/shared_memory.h) is not copied: the reader's
// receive() hands out the values where they lie in the lender's region (shared), the lender's
// buffer comes back only once the reader drops the chunk, a reader that checks then uses
// (receive_vector) gets them privatized, and one not taken for a while is copied out of the
// mapping by the comm thread. The values are exact every way.
TEST_F(SingleCopyTest, ChunksInASharedRegionAreReadInPlaceUntilTheReaderDropsThem) {
  if (!testing::process_vm_readv_works()) GTEST_SKIP() << "process_vm_readv is not allowed on this machine";
  auto [oa, ob] = lending_pair();
  ZmqTransport a(oa), b(ob);
  const size_t n = 10000;
  auto* data = static_cast<float*>(shm::allocate_shared(n * sizeof(float)));
  ASSERT_NE(data, nullptr);
  for (size_t i = 0; i < n; ++i) data[i] = float(i) * 0.25f - 3;
  {
    SendGuard guard;
    send_vector(a, 1, {MessageKind::kGossip, 0, 0}, data, guard.owner(), 0, n, n, 0, 4096);
    std::vector<std::optional<InMessage>> held;
    for (size_t got = 0; got < n;) {
      held.push_back(b.receive({MessageKind::kGossip, 0, 0, 0, 0}, Clock::now() + std::chrono::seconds(5)));
      ASSERT_TRUE(held.back());
      const InMessage& m = *held.back();
      EXPECT_TRUE(m.shared);
      EXPECT_NE(static_cast<const void*>(m.data), static_cast<const void*>(data + got))
          << "a mapping of its own, not the lender's address";
      ASSERT_EQ(m.header.offset, got);
      EXPECT_EQ(std::vector<float>(m.data, m.data + m.count), std::vector<float>(data + got, data + got + m.count));
      got += m.count;
    }
    EXPECT_THROW(guard.wait_released(0.3, "test"), PeerLost) << "the lender's buffer is still being read";
    held.clear();  // folded: the lender gets its buffer back
    SendGuard again;
    send_vector(a, 1, {MessageKind::kGossip, 1, 0}, data, again.owner(), 0, n, n, 0, 4096);
    std::vector<float> got(n, -1);
    receive_vector(b, 0, {MessageKind::kGossip, 1, 0}, 0, n, n, 5.0,
                   [&](size_t i, const float* v, size_t c) { std::copy(v, v + c, got.begin() + i); });
    again.wait_released(5.0, "test");  // privatized: released before the values are used
    EXPECT_EQ(got, std::vector<float>(data, data + n));
    SendGuard untaken;  // not taken for a while: the comm thread copies it out of the mapping
    send_vector(a, 1, {MessageKind::kGossip, 2, 0}, data, untaken.owner(), 0, 1000, 1000, 0, 4096);
    untaken.wait_released(5.0, "test");
    auto late = b.receive({MessageKind::kGossip, 0, 2, 0, 0}, Clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(late);
    EXPECT_FALSE(late->shared);
    EXPECT_EQ(std::vector<float>(late->data, late->data + late->count), std::vector<float>(data, data + 1000));
  }
  EXPECT_EQ(b.stats().bytes_mapped, (2 * n + 1000) * sizeof(float));
  EXPECT_EQ(a.stats().bytes_lent, (2 * n + 1000) * sizeof(float));
  EXPECT_EQ(a.stats().messages_dropped + b.stats().messages_dropped, 0u);
  EXPECT_TRUE(shm::free_shared(data));
}

// A receiver that will not copy (single_copy off there) refuses the first lent chunk and every
// one after it; the sender sends them all again over the socket, in order, and the next vectors
// go over the socket at once. Nothing is lost or reordered.
TEST_F(SingleCopyTest, RefusedSingleCopyFallsBackToTheSocketInOrder) {
  ZmqTransportOptions oa = options(0, 2);
  oa.single_copy = true;
  ZmqTransport a(oa), b(options(1, 2));
  std::vector<float> data(50000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i);
  for (uint64_t round = 0; round < 2; ++round) {
    SendGuard guard;
    send_vector(a, 1, {MessageKind::kPushSum, round, 0}, data.data(), guard.owner(), 0, data.size(), data.size(), 0.25,
                1000);
    std::vector<float> got(data.size(), -1);
    const Received r = receive_vector(b, 0, {MessageKind::kPushSum, round, 0}, 0, got.size(), got.size(), 5.0,
                                      [&](size_t i, const float* v, size_t c) { std::copy(v, v + c, got.begin() + i); });
    guard.wait_released(5.0, "test");
    EXPECT_EQ(got, data) << "round " << round;
    EXPECT_EQ(r.weight, 0.25);
  }
  EXPECT_EQ(a.stats().bytes_lent, 0u);
  EXPECT_EQ(b.stats().messages_dropped, 0u);
}

// A lent reference whose cookie does not match (another process, host or pid namespace; here a
// forged one) is not copied: the receiver says so, the forger's values never arrive, and the
// peer carries on with the next good message.
TEST_F(SingleCopyTest, ForgedLentReferenceIsNotCopied) {
  ZmqTransportOptions oa = options(0, 2);
  oa.single_copy = true;
  oa.timeout_s = 0.2;
  ZmqTransport a(oa);
  zmq::context_t ctx;
  zmq::socket_t rogue = claims_to_be_peer_1(ctx, a.bound_endpoint());
  std::vector<float> secret(8, 42.0f);
  LentRef ref;
  ref.pid = static_cast<uint64_t>(::getpid());  // a real, readable process...
  ref.address = reinterpret_cast<uintptr_t>(secret.data());
  uint64_t cookie = 1;
  ref.cookie_address = reinterpret_cast<uintptr_t>(&cookie);
  ref.cookie = 2;  // ...but not the one that lent it
  uint8_t frame[kLentRefBytes];
  encode_lent_ref(ref, frame);
  send_as_peer_1(rogue, 0, frame, kLentRefBytes, true);
  std::vector<float> values(8, 1.0f);
  send_as_peer_1(rogue, 0, values.data(), 32, false);
  std::vector<float> got;
  receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 8, 8, 5.0,
                 [&](size_t, const float* v, size_t c) { got.assign(v, v + c); });
  EXPECT_EQ(got, values) << "the forged reference's values were copied";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the connect timeout below
  send_as_peer_1(rogue, 1, values.data(), 32, false);
  EXPECT_NO_THROW(receive_vector(a, 1, {MessageKind::kGossip, 1, 0}, 0, 8, 8, 5.0, [](size_t, const float*, size_t) {}))
      << "answering the forger must not wait on its (never published) endpoint";
}

// The reader copies a lent chunk when it takes it; one it does not come for is copied by its
// comm thread after a moment, so the lender's send completes all the same (the reader may be
// busy, or never want it), and the values, taken later, are still exactly the lender's.
TEST_F(SingleCopyTest, ALentChunkTheReaderDoesNotTakeIsCopiedForIt) {
  if (!testing::process_vm_readv_works()) GTEST_SKIP() << "process_vm_readv is not allowed on this machine";
  auto [oa, ob] = lending_pair();
  ZmqTransport a(oa), b(ob);
  std::vector<float> data(50000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) + 0.25f;
  {
    SendGuard guard;
    send_vector(a, 1, {MessageKind::kGossip, 7, 0}, data.data(), guard.owner(), 0, data.size(), data.size(), 0, 4096);
    EXPECT_NO_THROW(guard.wait_released(5.0, "test")) << "nobody answered the lender";
  }
  std::fill(data.begin(), data.end(), -1.0f);  // the lender reuses its buffer
  std::vector<float> got(data.size(), 0);
  receive_vector(b, 0, {MessageKind::kGossip, 7, 0}, 0, got.size(), got.size(), 5.0,
                 [&](size_t i, const float* v, size_t c) { std::copy(v, v + c, got.begin() + i); });
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], float(i) + 0.25f) << i;
  EXPECT_EQ(a.stats().bytes_lent, data.size() * 4);
}

// A reader that stops right after it copied a lent chunk still answers it: the lender's send
// completes (its comm thread sends the answers the training thread left before it exits).
TEST_F(SingleCopyTest, AReaderThatStopsRightAfterItsCopyStillAnswers) {
  if (!testing::process_vm_readv_works()) GTEST_SKIP() << "process_vm_readv is not allowed on this machine";
  for (int trial = 0; trial < 20; ++trial) {
    auto [oa, ob] = lending_pair();
    ZmqTransport a(oa);
    std::vector<float> data(1000, float(trial));
    SendGuard guard;
    {
      ZmqTransport b(ob);
      send_vector(a, 1, {MessageKind::kAllGather, uint64_t(trial), 0}, data.data(), guard.owner(), 0, data.size(),
                  data.size(), 0, 1000);
      size_t got = 0;
      receive_vector(b, 0, {MessageKind::kAllGather, uint64_t(trial), 0}, 0, data.size(), data.size(), 5.0,
                     [&](size_t, const float*, size_t c) { got += c; });
      EXPECT_EQ(got, data.size());
    }
    EXPECT_NO_THROW(guard.wait_released(2.0, "test")) << "trial " << trial;
    fs::remove(dir_ / "peer-0");
    fs::remove(dir_ / "peer-1");
  }
}

// A reference that passes the cookie check but whose values cannot be read (here: an address
// nothing is mapped at) is refused when the copy fails: the chunk is never delivered, and the
// next message of that sender, over the socket, is.
TEST_F(SingleCopyTest, ALentChunkWhoseCopyFailsIsRefusedAndNotDelivered) {
  ZmqTransportOptions oa = options(0, 2);
  oa.single_copy = true;
  ZmqTransport a(oa);
  zmq::context_t ctx;
  zmq::socket_t rogue = claims_to_be_peer_1(ctx, a.bound_endpoint());
  uint64_t cookie = 0x5eed;
  LentRef ref;
  ref.pid = static_cast<uint64_t>(::getpid());
  ref.address = 16;  // unmapped
  ref.cookie_address = reinterpret_cast<uintptr_t>(&cookie);
  ref.cookie = cookie;
  uint8_t frame[kLentRefBytes];
  encode_lent_ref(ref, frame);
  send_as_peer_1(rogue, 0, frame, kLentRefBytes, true);
  std::vector<float> values(8, 3.0f), got;
  send_as_peer_1(rogue, 1, values.data(), 32, false);
  EXPECT_THROW(receive_vector(a, 1, {MessageKind::kGossip, 0, 0}, 0, 8, 8, 0.5, [](size_t, const float*, size_t) {}),
               PeerLost);
  receive_vector(a, 1, {MessageKind::kGossip, 1, 0}, 0, 8, 8, 5.0,
                 [&](size_t, const float* v, size_t c) { got.assign(v, v + c); });
  EXPECT_EQ(got, values);
}

// Lenders that rewrite their shared values while the reader folds them in place (here a thread
// setting one value of every chunk of two neighbours to NaN and back, over and over) never get a
// value into the mix that the fold did not check in the pass that mixed it — also when one
// neighbour's NaN makes the reader fold the span again and the other's values are read anew.
// Each chunk of the result is one of the four mixes (both neighbours in, either left out, both
// left out), the same over the whole chunk; never NaN. 40 rounds of 16 chunks of a ring of 3.
TEST_F(SingleCopyTest, ValuesLendersRewriteDuringTheFoldAreNeverMixedUnchecked) {
  if (!testing::process_vm_readv_works()) GTEST_SKIP() << "process_vm_readv is not allowed on this machine";
  std::vector<ZmqTransportOptions> o;
  for (int r = 0; r < 3; ++r) {
    o.push_back(options(r, 3));
    o.back().single_copy = true;
  }
  ZmqTransport a(o[0]), b(o[1]), c(o[2]);
  const size_t n = 16 * 4096, chunk = 4096;
  auto* from_a = static_cast<float*>(shm::allocate_shared(n * sizeof(float)));
  auto* from_c = static_cast<float*>(shm::allocate_shared(n * sizeof(float)));
  ASSERT_TRUE(from_a && from_c);
  std::fill(from_a, from_a + n, 2.0f);
  std::fill(from_c, from_c + n, 4.0f);
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    volatile float* va = from_a;
    volatile float* vc = from_c;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    while (!stop.load(std::memory_order_relaxed)) {
      for (size_t k = 0; k < n; k += chunk) {
        va[k + 7] = nan;
        vc[k + 11] = nan;
      }
      for (size_t k = 0; k < n; k += chunk) {
        va[k + 7] = 2.0f;
        vc[k + 11] = 4.0f;
      }
    }
  });
  GossipStep step(b, topology::Graph{topology::Kind::kRing, 0, {}}, n, chunk, 10.0, 10.0);
  std::vector<float> x(n, 1.0f), out(n);
  const float third = 1.0f / 3;  // each mix: ⅓ of ours and ⅓ of each neighbour's or, left out, ours again
  const float mixes[] = {third * 1 + third * 2 + third * 4, third * 1 + third * 1 + third * 4,
                         third * 1 + third * 2 + third * 1, 1.0f};
  std::vector<size_t> seen(4, 0);
  size_t wrong = 0;
  for (uint64_t round = 0; round < 40; ++round) {
    SendGuard guard;
    send_vector(a, 1, {MessageKind::kGossip, round, 0}, from_a, guard.owner(), 0, n, n, 0, chunk);
    send_vector(c, 1, {MessageKind::kGossip, round, 0}, from_c, guard.owner(), 0, n, n, 0, chunk);
    step.step(round, x.data(), out.data());
    guard.wait_released(10.0, "test");
    for (size_t k = 0; k < n; k += chunk) {
      int which = -1;
      for (int m = 0; m < 4; ++m)
        if (std::all_of(&out[k], &out[k + chunk], [&](float v) { return std::fabs(v - mixes[m]) < 1e-5f; })) which = m;
      if (which < 0) ++wrong;
      else ++seen[which];
    }
  }
  stop = true;
  flipper.join();
  EXPECT_EQ(wrong, 0u) << "mixed " << seen[0] << ", without a " << seen[1] << ", without c " << seen[2]
                       << ", without both " << seen[3];
  EXPECT_GT(b.stats().bytes_mapped, 0u);
  EXPECT_TRUE(shm::free_shared(from_a));
  EXPECT_TRUE(shm::free_shared(from_c));
}

// A lent reference naming a region the reader must not map — here a memfd that could shrink, so
// a read of the mapping could fault — is not mapped: the reader copies the values out of the
// lender's memory as for any lent chunk, and they arrive exact and private.
TEST_F(SingleCopyTest, ARegionThatCouldShrinkIsNotMappedAndTheValuesAreCopiedInstead) {
  if (!testing::process_vm_readv_works()) GTEST_SKIP() << "process_vm_readv is not allowed on this machine";
  ZmqTransportOptions oa = options(0, 2);
  oa.single_copy = true;
  ZmqTransport a(oa);
  zmq::context_t ctx;
  zmq::socket_t rogue = claims_to_be_peer_1(ctx, a.bound_endpoint());
  const int fd = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8};
  uint64_t cookie = 0x5eed;
  LentRef ref;
  ref.pid = static_cast<uint64_t>(::getpid());
  ref.address = reinterpret_cast<uintptr_t>(values.data());
  ref.cookie_address = reinterpret_cast<uintptr_t>(&cookie);
  ref.cookie = cookie;
  ref.fd = static_cast<uint64_t>(fd);
  ref.inode = st.st_ino;
  uint8_t frame[kLentRefBytes];
  encode_lent_ref(ref, frame);
  send_as_peer_1(rogue, 0, frame, kLentRefBytes, true);
  std::optional<InMessage> m = a.receive({MessageKind::kGossip, 1, 0, 0, 0}, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->shared);
  EXPECT_EQ(std::vector<float>(m->data, m->data + m->count), values);
  EXPECT_EQ(a.stats().bytes_mapped, 0u);
  ::close(fd);
}

// The answers owed to lenders: posted by tickets however they go, taken by the comm thread;
// none once the transport closed them; refusals remembered per lender.
TEST(LentAnswers, TicketsPostTheirAnswerAndCountWhileTheyWait) {
  const int fd = ::eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  auto answers = std::make_shared<LentAnswers>(fd);
  {
    LentTicket copied(answers, LentAnswer{3, 11, true, "r3"});
    auto refused = std::make_unique<LentTicket>(answers, LentAnswer{4, 12, true, "r4"});
    EXPECT_EQ(answers->waiting(), 2);
    refused->answer.copied = false;
    refused.reset();
    EXPECT_EQ(answers->waiting(), 1);
  }
  EXPECT_EQ(answers->waiting(), 0);
  uint64_t woken = 0;
  EXPECT_EQ(::read(fd, &woken, sizeof(woken)), ssize_t(sizeof(woken)));
  EXPECT_EQ(woken, 2u);
  std::vector<LentAnswer> got = answers->take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].lender, 4);
  EXPECT_FALSE(got[0].copied);
  EXPECT_EQ(got[1].token, 11u);
  EXPECT_TRUE(got[1].copied);
  EXPECT_EQ(got[1].identity, "r3");
  EXPECT_TRUE(answers->take().empty());
  EXPECT_FALSE(answers->refused(4));
  answers->refuse_from(4);
  EXPECT_TRUE(answers->refused(4));
  EXPECT_FALSE(answers->refused(3));
  answers->close();
  { LentTicket late(answers, LentAnswer{5, 13, true, "r5"}); }
  EXPECT_TRUE(answers->take().empty());
  EXPECT_EQ(::read(fd, &woken, sizeof(woken)), -1) << "a closed transport's eventfd was written";
  ::close(fd);
}

}  // namespace
}  // namespace gossip::peer
