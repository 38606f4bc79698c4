// The membership agreement (Membership::agree, joins, welcomes, cut-offs) run by threads over the
// in-process transport: no processes, no sockets, each case well under a second. The test plays
// the failure detector (InprocTransport::suspect) and injects crashes (InprocFabric).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "membership/membership.h"
#include "transport/inproc/inproc_transport.h"

namespace gossip::peer {
namespace {

constexpr double kTimeoutS = 5;    // bounds one view change; a failing case ends by then
constexpr size_t kParams = 1000;   // every member's model size
// Every member's shared settings (as peer/config.h's shared_settings writes them).
const std::string kSettings = "algorithm.kind=gossip;topology=ring;algorithm.wire=f32;log_every=100";
constexpr int64_t kRound = 10;     // the round every member is at when a change starts

View first_view(int n) {
  View v;
  for (int i = 0; i < n; ++i) v.members.push_back({i, "inproc://" + std::to_string(i), ""});
  v.next_id = n;
  return v;
}

std::vector<int> ids_of(const View& v) {
  std::vector<int> ids;
  for (const Member& m : v.members) ids.push_back(m.id);
  return ids;
}

// One peer's membership stack over its port, as gossip-peer wires it.
struct Node {
  Node(MembershipPort& port, const View& v, int id) : view(port, v, id), membership(port, view, kTimeoutS, {kParams, kSettings}) {
    view.set_view(v, id);
  }
  ViewTransport view;
  Membership membership;
};

struct Outcome {
  View view;
  std::optional<std::string> cut_off;
  std::string error;
  int changes = 0;
};

// Takes part in every view change that comes up (welcoming the joiners it was asked by) until
// `done(view)` holds or it is cut off; what went wrong goes into Outcome::error.
Outcome take_part(Node& node, const std::function<bool(const View&)>& done) {
  Outcome out;
  const auto deadline = Clock::now() + std::chrono::duration<double>(2 * kTimeoutS);
  try {
    while (!done(node.view.view())) {
      if (Clock::now() > deadline) throw Error("test", "no view change settled it");
      if (!node.membership.pending()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      std::optional<ViewChange> change = node.membership.agree(kRound);
      if (!change) continue;
      ++out.changes;
      if (change->cut_off) {
        out.cut_off = change->cut_off;
        break;
      }
      for (const JoinRequest& j : change->welcome) node.membership.send_welcome(*change, j, 100);
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.view = node.view.view();
  return out;
}

// A joiner in `slot` asking the member at `contact`; once welcomed it takes part like a member.
Outcome join_and_take_part(InprocFabric& fabric, int slot, const std::string& contact, size_t params,
                           const std::function<bool(const View&)>& done) {
  InprocTransport port(fabric, slot, -1);
  Outcome out;
  try {
    Membership::request_join(port, contact, "", port.own_endpoint(), "", {params, kSettings});
    const Welcome w = Membership::await_welcome(port, contact, Clock::now() + std::chrono::seconds(5), 5);
    Node node(port, w.view, w.id);
    node.membership.note_admitted(w.admitted);
    return take_part(node, done);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

bool has_id(const View& v, int id) { return v.rank_of(id) >= 0; }

// Members 0..n-1 of the first view, and joiners (slot, contact), each on its own thread until
// `done` holds for its view; the outcomes by slot.
std::vector<Outcome> run_threads(InprocFabric& fabric, int n, const std::vector<std::pair<int, std::string>>& joiners,
                                 const std::function<bool(const View&)>& done) {
  const View start = first_view(n);
  std::vector<Outcome> out(fabric.size());
  std::vector<std::unique_ptr<InprocTransport>> ports;  // all made before any sends
  for (int i = 0; i < n; ++i) ports.push_back(std::make_unique<InprocTransport>(fabric, i, i));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      Node node(*ports[i], start, i);
      out[i] = take_part(node, done);
    });
  for (const auto& [slot, contact] : joiners)
    threads.emplace_back([&, slot, contact] { out[slot] = join_and_take_part(fabric, slot, contact, kParams, done); });
  for (auto& t : threads) t.join();
  return out;
}

TEST(Agreement, ConcurrentJoinsThroughDifferentMembersEndInOneView) {
  InprocFabric fabric(6);
  const std::vector<Outcome> out = run_threads(fabric, 4, {{4, "inproc://0"}, {5, "inproc://2"}},
                                               [](const View& v) { return v.members.size() == 6; });
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(out[i].error, "") << "slot " << i;
    EXPECT_FALSE(out[i].cut_off) << "slot " << i;
    EXPECT_EQ(ids_of(out[i].view), (std::vector<int>{0, 1, 2, 3, 4, 5})) << "slot " << i;
    EXPECT_EQ(out[i].view.epoch, out[0].view.epoch) << "slot " << i;
    EXPECT_EQ(out[i].view.next_id, 6) << "slot " << i;
  }
  // Each joiner sits at its own endpoint under one of the two new ids.
  EXPECT_NE(out[0].view.members[4].endpoint, out[0].view.members[5].endpoint);
  for (int id : {4, 5}) {
    const std::string& ep = out[0].view.members[out[0].view.rank_of(id)].endpoint;
    EXPECT_TRUE(ep == "inproc://4" || ep == "inproc://5") << ep;
  }
}

TEST(Agreement, AMemberThatCrashesDuringAChangeIsLeftOutAndTheJoinStillHappens) {
  InprocFabric fabric(5);
  // Peer 3 dies right after its first round of proposals reached the three others.
  fabric.crash_after_sending(3, MessageKind::kView, 3);
  const std::vector<Outcome> out = run_threads(fabric, 4, {{4, "inproc://0"}}, [](const View& v) {
    return !has_id(v, 3) && v.members.size() == 4;
  });
  EXPECT_NE(out[3].error.find("slot 3 crashed"), std::string::npos) << out[3].error;
  for (int i : {0, 1, 2, 4}) {
    EXPECT_EQ(out[i].error, "") << "slot " << i;
    EXPECT_EQ(ids_of(out[i].view), (std::vector<int>{0, 1, 2, 4})) << "slot " << i;
    EXPECT_EQ(out[i].view.epoch, out[0].view.epoch) << "slot " << i;
  }
  EXPECT_EQ(out[0].view.members[3].endpoint, "inproc://4");
}

TEST(Agreement, ALateProposalOfAFinishedEpochGetsTheDecisionAndDisturbsNoOne) {
  InprocFabric fabric(4);
  const View start = first_view(4);
  std::vector<std::unique_ptr<InprocTransport>> ports;
  for (int i = 0; i < 4; ++i) ports.push_back(std::make_unique<InprocTransport>(fabric, i, i));
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(std::make_unique<Node>(*ports[i], start, i));
  // Peer 3 stalls (nothing reaches it or leaves it); the others suspect it and move on.
  fabric.set_reachable(3, false);
  for (int i = 0; i < 3; ++i) ports[i]->suspect(3);
  std::vector<Outcome> out(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] { out[i] = take_part(*nodes[i], [](const View& v) { return !has_id(v, 3); }); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].error, "") << "slot " << i;
    EXPECT_EQ(ids_of(out[i].view), (std::vector<int>{0, 1, 2})) << "slot " << i;
    EXPECT_EQ(out[i].view.epoch, 1u);
  }
  // It wakes up, has heard nothing from peer 0 meanwhile and proposes its removal in epoch 0:
  // the others answer with their decision, which says peer 3 is gone.
  fabric.set_reachable(3, true);
  ports[3]->suspect(0);
  ASSERT_TRUE(nodes[3]->membership.pending());
  std::optional<ViewChange> late = nodes[3]->membership.agree(kRound);
  ASSERT_TRUE(late);
  ASSERT_TRUE(late->cut_off);
  EXPECT_NE(late->cut_off->find("declared this peer gone"), std::string::npos) << *late->cut_off;
  EXPECT_EQ(nodes[3]->view.view().epoch, 0u);  // it adopted no view
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(nodes[i]->membership.pending()) << "slot " << i << " was disturbed by the late proposal";
    EXPECT_EQ(ports[i]->mailbox().pending(), 0u) << "slot " << i;
  }
}

// A partition of five into {0,1,2} and {3,4}: peer 3 ends the change cut off (no majority) after
// peer 4 said it was ready, but all of peer 3's messages to peer 4 are lost. Peer 4 then proposes
// to peer 3, which answers "cut off" (tag 2) instead of leaving it waiting for the view-change
// timeout: peer 4 counts it gone and finds itself cut off too, at once.
TEST(Agreement, AMemberThatMissedTheLastMessageOfAPeerCutOffLearnsItFromItsAnswer) {
  InprocFabric fabric(5);
  const View start = first_view(5);
  std::vector<std::unique_ptr<InprocTransport>> ports;
  for (int i = 0; i < 5; ++i) ports.push_back(std::make_unique<InprocTransport>(fabric, i, i));
  for (int i : {3, 4}) fabric.set_side(i, 1);
  Node node3(*ports[3], start, 3), node4(*ports[4], start, 4);
  for (int i : {0, 1, 2}) ports[3]->suspect(i);
  ViewProposal ready4;  // what peer 4 would say once ready on peer 3's set
  ready4.round = kRound;
  ready4.gone = {0, 1, 2};
  ready4.ready = true;
  ports[4]->send(3, text_message(MessageKind::kView, 0, kRound, kViewProposal,
                                 std::make_shared<const std::string>(pad_text(proposal_text(ready4, {})))));
  ASSERT_TRUE(node3.membership.pending());
  const std::optional<ViewChange> change3 = node3.membership.agree(kRound);
  ASSERT_TRUE(change3 && change3->cut_off);
  EXPECT_NE(change3->cut_off->find("keeps 2 of the 5 members"), std::string::npos) << *change3->cut_off;
  size_t lost = 0;  // peer 3's proposals to peer 4 never arrive
  while (ports[4]->mailbox().take_any({MessageKind::kView}, Clock::now())) ++lost;
  EXPECT_GE(lost, 1u);
  for (int i : {0, 1, 2}) ports[4]->suspect(i);
  ASSERT_TRUE(node4.membership.pending());
  const auto started = Clock::now();
  std::optional<ViewChange> change4;
  ASSERT_NO_THROW(change4 = node4.membership.agree(kRound));  // (without the answer: PeerLost after kTimeoutS)
  ASSERT_TRUE(change4 && change4->cut_off);
  EXPECT_NE(change4->cut_off->find("keeps 1 of the 5 members"), std::string::npos) << *change4->cut_off;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), kTimeoutS / 2);
  EXPECT_EQ(node4.view.view().epoch, 0u);  // no view adopted
}

// A joiner that is refused gets the reason, and the view stays as it was.
void expect_refused(const JoinTerms& joiner_terms, int64_t total_steps, const std::string& reason) {
  InprocFabric fabric(3);
  const View start = first_view(2);
  InprocTransport member0(fabric, 0, 0), member1(fabric, 1, 1);
  Node node0(member0, start, 0), node1(member1, start, 1);
  node0.membership.set_total_steps(total_steps);
  InprocTransport joiner(fabric, 2, -1);
  Membership::request_join(joiner, "inproc://0", "", joiner.own_endpoint(), "", joiner_terms);
  ASSERT_TRUE(node0.membership.pending());
  EXPECT_FALSE(node0.membership.agree(kRound));  // nothing to change
  try {
    (void)Membership::await_welcome(joiner, "inproc://0", Clock::now() + std::chrono::seconds(5), 5);
    ADD_FAILURE() << "the join was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refused: " + reason), std::string::npos) << e.what();
  }
  EXPECT_EQ(ids_of(node0.view.view()), (std::vector<int>{0, 1}));
  EXPECT_EQ(node0.view.view().epoch, 0u);
  EXPECT_FALSE(node1.membership.pending());  // the other member never heard of it
}

TEST(Agreement, AJoinerWithAnotherModelSizeIsRefusedWithTheReason) {
  expect_refused({kParams + 1, kSettings}, 0, "its model has 1001 parameters, this run's 1000");
}

TEST(Agreement, AJoinInTheLastRoundIsRefused) { expect_refused({kParams, kSettings}, kRound + 1, "the run ends at round 11"); }

// Another wire format (or any shared setting) would make the run's exchanges fail once it is in.
TEST(Agreement, AJoinerWithOtherSharedSettingsIsRefusedNamingThem) {
  std::string bf16 = kSettings;
  bf16.replace(bf16.find("wire=f32"), 8, "wire=bf16");
  expect_refused({kParams, bf16}, 0, "its algorithm.wire is bf16, this run's f32 (every peer of a run needs these alike)");
  expect_refused({kParams, ""}, 0, "its algorithm.kind is not given, this run's gossip; its topology is not given");
}

TEST(SettingsDifference, NamesEachDifferingSettingInTheRunsOrder) {
  const std::string run = "a=1;b=x;c=2.5";
  EXPECT_EQ(settings_difference(run, run), "");
  EXPECT_EQ(settings_difference("c=2.5;b=x;a=1", run), "") << "order does not matter";
  EXPECT_EQ(settings_difference("a=1;b=x;c=2.5;d=9", run), "") << "only the run's settings are compared";
  EXPECT_EQ(settings_difference("a=2;b=x", run), "its a is 2, this run's 1; its c is not given, this run's 2.5");
  EXPECT_EQ(settings_difference("-", "a=1"), "its a is not given, this run's 1");
  EXPECT_EQ(settings_difference("a=1", ""), "") << "a run without settings compares none";
}

TEST(SettingsDifference, EscapesTheJoinersValuesAndCountsBeyondFour) {
  EXPECT_EQ(settings_difference("a=\x1b[31m", "a=1"), "its a is \\x1b[31m, this run's 1");
  const std::string tail(500, 'z');
  const std::string said = settings_difference("a=" + tail, "a=1");
  EXPECT_LT(said.size(), 120u) << "a joiner's value is cut short: " << said;
  EXPECT_EQ(settings_difference("", "a=1;b=2;c=3;d=4;e=5;f=6"),
            "its a is not given, this run's 1; its b is not given, this run's 2; its c is not given, this run's 3; "
            "its d is not given, this run's 4; and 2 more");
}

}  // namespace
}  // namespace gossip::peer
