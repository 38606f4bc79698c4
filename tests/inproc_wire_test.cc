// The in-process fabric's link model (InprocWire): latency, order and loss, and partitions
// (InprocFabric::set_side), which the agreement simulation (bench/agreement_bench.cc) relies on.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/inproc/inproc_transport.h"
#include "transport/inproc/inproc_wire.h"

namespace gossip::peer {
namespace {

InMessage message_of(MessageKind kind, uint64_t round) {
  InMessage m;
  m.header.kind = kind;
  m.header.round = round;
  return m;
}

struct Arrivals {
  std::mutex mutex;
  std::vector<std::pair<uint64_t, Clock::time_point>> seen;  // (round, when)
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return seen.size();
  }
};

void wait_for(Arrivals& a, size_t n) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (a.size() < n && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(InprocWire, MessagesArriveAfterTheLatencyInTheOrderTheyAreDue) {
  Arrivals a;
  LinkModel model;
  model.latency_s = 0.03;
  InprocWire wire(model, [&](int, InMessage m) {
    std::lock_guard<std::mutex> lock(a.mutex);
    a.seen.emplace_back(m.header.round, Clock::now());
  });
  const auto sent = Clock::now();
  for (uint64_t r = 0; r < 20; ++r) wire.send(0, 1, message_of(MessageKind::kGossip, r));
  wait_for(a, 20);
  ASSERT_EQ(a.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(a.seen[i].first, i);  // same latency, no jitter: the order of sending
    EXPECT_GE(std::chrono::duration<double>(a.seen[i].second - sent).count(), 0.03 - 1e-3);
  }
}

TEST(InprocWire, WithJitterEachLinkStaysInOrder) {
  Arrivals a;
  LinkModel model;
  model.latency_s = 0.001;
  model.jitter_s = 0.01;
  InprocWire wire(model, [&](int to, InMessage m) {
    std::lock_guard<std::mutex> lock(a.mutex);
    a.seen.emplace_back(m.header.round * 2 + static_cast<uint64_t>(to), Clock::now());
  });
  for (uint64_t r = 0; r < 200; ++r) wire.send(static_cast<int>(r % 2), static_cast<int>(r % 2), message_of(MessageKind::kView, r));
  wait_for(a, 200);
  ASSERT_EQ(a.size(), 200u);
  uint64_t last[2] = {0, 0};
  bool reordered_across_links = false;
  for (size_t i = 0; i < a.seen.size(); ++i) {
    const uint64_t round = a.seen[i].first / 2, link = a.seen[i].first % 2;
    if (i > 0) {
      EXPECT_GE(round, last[link]) << "link " << link << " reordered";
    }
    last[link] = round;
    if (i > 0 && a.seen[i].first % 2 == a.seen[i - 1].first % 2) reordered_across_links = true;
  }
  EXPECT_TRUE(reordered_across_links);  // sent alternately, yet not received so: the jitter acted
}

TEST(InprocWire, OnlyViewChangeMessagesAreLostAtTheRateAsked) {
  Arrivals a;
  LinkModel model;
  model.loss = 0.25;
  model.seed = 7;
  InprocWire wire(model, [&](int, InMessage m) {
    std::lock_guard<std::mutex> lock(a.mutex);
    a.seen.emplace_back(static_cast<uint64_t>(m.header.kind), Clock::now());
  });
  for (int i = 0; i < 4000; ++i) wire.send(1, 0, message_of(i % 2 ? MessageKind::kView : MessageKind::kWelcome, 0));
  const size_t expected = 4000 - wire.lost();
  wait_for(a, expected);
  size_t views = 0, welcomes = 0;
  for (const auto& [kind, when] : a.seen) (kind == static_cast<uint64_t>(MessageKind::kView) ? views : welcomes)++;
  EXPECT_EQ(welcomes, 2000u);
  EXPECT_EQ(views + wire.lost(), 2000u);
  EXPECT_NEAR(wire.lost() / 2000.0, 0.25, 0.04);  // 4.5 standard deviations of a binomial draw
}

TEST(InprocFabric, NothingCrossesAPartitionAndEverythingWithinASideArrives) {
  InprocFabric fabric(3);
  InprocTransport a(fabric, 0), b(fabric, 1), c(fabric, 2);
  fabric.set_side(2, 1);
  auto text = std::make_shared<const std::string>(pad_text("hello\n"));
  a.send(1, text_message(MessageKind::kView, 0, 1, 0, text));
  a.send(2, text_message(MessageKind::kView, 0, 1, 0, text));
  c.send(0, text_message(MessageKind::kView, 0, 2, 0, text));
  EXPECT_TRUE(b.mailbox().take_any({MessageKind::kView}, Clock::now()));
  EXPECT_FALSE(c.mailbox().take_any({MessageKind::kView}, Clock::now()));
  EXPECT_FALSE(a.mailbox().take_any({MessageKind::kView}, Clock::now()));
  fabric.set_side(2, 0);  // healed
  c.send(0, text_message(MessageKind::kView, 0, 3, 0, text));
  EXPECT_TRUE(a.mailbox().take_any({MessageKind::kView}, Clock::now()));
}

}  // namespace
}  // namespace gossip::peer
