// A rogue process throws bad bytes at a live peer: each message is dropped and logged with its
// sender, the peer keeps training, and its memory stays bounded.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <zmq.hpp>

#include "wire/wire_format.h"
#include "process_util.h"

namespace gossip {
namespace {

using testing::read_file;
using testing::run_command;
using testing::TempDir;


long rss_kib(const std::string& yaml, int rank) {
  auto pid = run_command("pgrep -f '[g]ossip-peer --config " + yaml + " --rank " + std::to_string(rank) + "'", 10);
  auto status = read_file("/proc/" + std::to_string(std::atol(pid.output.c_str())) + "/status");
  const size_t at = status.find("VmRSS:");
  return at == std::string::npos ? -1 : std::atol(status.c_str() + at + 6);
}

// Two ring peers that train until stopped (`extra`: more YAML), under way for 0.5 s: the run, its
// YAML and peer 0's endpoint (empty when it did not start).
struct EndlessRun {
  explicit EndlessRun(const std::string& extra)
      : yaml(dir.write("run.yaml",
                       "seed: 2\ndevice: cpu\n" + extra + "peers: {count: 2, host: 127.0.0.1, base_port: 0}\n"
                       "topology: ring\nalgorithm: gossip\nmodel: {hidden: [32]}\n"
                       "data: {dataset: synthetic, synthetic: {train: 4000, test: 200, dims: 32, classes: 4}}\n"
                       "optimizer: {lr: 0.01, batch: 32, epochs: 100000}\n")),
        run(yaml, dir.path() + "/run.log"),
        endpoint(run.peer0_endpoint()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // training under way
  }
  TempDir dir;
  std::string yaml;
  testing::BackgroundRun run;
  std::string endpoint;
};

TEST(HostileInput, RogueMessagesAreDroppedAndTrainingGoesOn) {
  EndlessRun live("log_every: 50\n");
  ASSERT_FALSE(live.endpoint.empty()) << live.run.log();
  const std::string& yaml = live.yaml;
  const std::string& endpoint = live.endpoint;
  testing::BackgroundRun& run = live.run;
  const long rss_before = rss_kib(yaml, 0);

  zmq::context_t ctx;
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::routing_id, "rogue");
  rogue.set(zmq::sockopt::linger, 0);
  rogue.connect(endpoint);
  auto send_two = [&](const void* h, size_t hb, const void* p, size_t pb) {
    rogue.send(zmq::const_buffer(h, hb), zmq::send_flags::sndmore);
    rogue.send(zmq::const_buffer(p, pb), zmq::send_flags::none);
  };
  auto encoded = [](peer::Header h, const std::vector<float>& payload, bool fix_checksum = true) {
    h.sender = 1;
    h.payload_bytes = static_cast<uint32_t>(payload.size() * 4);
    if (fix_checksum) h.checksum = peer::message_checksum(h, payload.data(), h.payload_bytes);
    std::vector<uint8_t> out(peer::kHeaderBytes);
    peer::encode_header(h, out.data());
    return out;
  };
  peer::Header base;
  base.kind = peer::MessageKind::kGossip;
  base.round = 1u << 30;  // far ahead: never a round the peer waits for
  base.total_floats = 4;
  const std::vector<float> four{1, 2, 3, 4};
  rogue.send(zmq::str_buffer("GET / HTTP/1.0\r\n\r\n"), zmq::send_flags::none);  // garbage, one frame
  send_two("short", 5, four.data(), 16);                                          // truncated header
  peer::Header v = base;
  v.version = 7;
  auto hv = encoded(v, four);
  send_two(hv.data(), hv.size(), four.data(), 16);  // another protocol version
  peer::Header big = base;
  big.total_floats = 1ull << 40;
  auto hb = encoded(big, four);
  send_two(hb.data(), hb.size(), four.data(), 16);  // another model shape
  peer::Header len = base;
  auto hl = encoded(len, four);
  peer::Header lie = peer::decode_header(hl.data());
  lie.payload_bytes = 0xFFFFFFF0u;  // huge length field
  peer::encode_header(lie, hl.data());
  send_two(hl.data(), hl.size(), four.data(), 16);
  // A flood of 5 MB frames: over the peer's maximum message size, so ZeroMQ drops them (and the
  // connection) without buffering them.
  std::vector<char> junk(5 << 20, 'x');
  for (int i = 0; i < 100; ++i) rogue.send(zmq::buffer(junk), zmq::send_flags::dontwait);
  // Claiming the real neighbour's identity: ZeroMQ refuses the second connection named "r1".
  zmq::socket_t spoof(ctx, zmq::socket_type::dealer);
  spoof.set(zmq::sockopt::routing_id, "r1");
  spoof.set(zmq::sockopt::linger, 0);
  spoof.connect(endpoint);
  auto hs = encoded(base, four);
  spoof.send(zmq::const_buffer(hs.data(), hs.size()), zmq::send_flags::sndmore);
  spoof.send(zmq::const_buffer(four.data(), 16), zmq::send_flags::none);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const long rss_after = rss_kib(yaml, 0);
  const std::string before_stop = run.log();
  run.stop();

  for (const char* reason : {"frames (expected header + payload)", "header frame of 5 bytes", "protocol version 7",
                             "sender field 1 does not match the connection", "payload of 16 bytes but header says"})
    EXPECT_NE(before_stop.find(reason), std::string::npos) << reason << "\n" << before_stop;
  EXPECT_NE(before_stop.find("dropped a message from 'rogue'"), std::string::npos);
  // Still training after the attack: step lines keep coming.
  const size_t last_drop = before_stop.rfind("dropped a message");
  EXPECT_NE(before_stop.find("] step ", last_drop), std::string::npos) << "training went on\n" << before_stop;
  std::printf("peer 0 RSS before the attack %ld KiB, after %ld KiB\n", rss_before, rss_after);
  ASSERT_GT(rss_before, 0);
#if !defined(__SANITIZE_ADDRESS__)  // ASan's quarantine holds up to 256 MB of freed memory: RSS tells nothing there
  EXPECT_LT(rss_after - rss_before, 64 * 1024) << "RSS grew from " << rss_before << " to " << rss_after << " KiB";
#endif
}

// A join request naming an endpoint ZeroMQ cannot dial ("tcp://x:", no port): the peer drops
// it as malformed instead of dialling it to send its refusal (which ZeroMQ answers with an
// exception on the comm thread), and trains on.
TEST(HostileInput, AJoinRequestNamingAnEndpointNobodyCanDialIsDropped) {
  EndlessRun live("log_every: 50\n");
  ASSERT_FALSE(live.endpoint.empty()) << live.run.log();
  const std::string& endpoint = live.endpoint;
  testing::BackgroundRun& run = live.run;
  zmq::context_t ctx;
  zmq::socket_t joiner(ctx, zmq::socket_type::dealer);
  joiner.set(zmq::sockopt::routing_id, "j77.0");
  joiner.set(zmq::sockopt::linger, 0);
  joiner.connect(endpoint);
  const std::string text = peer::pad_text("join 77 tcp://x: 100 - -");
  peer::Header h;
  h.kind = peer::MessageKind::kJoin;
  h.payload_bytes = static_cast<uint32_t>(text.size());
  h.total_floats = text.size() / sizeof(float);
  h.checksum = peer::message_checksum(h, text.data(), h.payload_bytes);
  std::vector<uint8_t> header(peer::kHeaderBytes);
  peer::encode_header(h, header.data());
  joiner.send(zmq::const_buffer(header.data(), header.size()), zmq::send_flags::sndmore);
  joiner.send(zmq::const_buffer(text.data(), text.size()), zmq::send_flags::none);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::string log = run.log();
  run.stop();
  EXPECT_NE(log.find("dropped a malformed join request"), std::string::npos) << log;
  EXPECT_EQ(log.find("error"), std::string::npos) << log;
  EXPECT_NE(log.find("] step ", log.find("dropped a malformed join request")), std::string::npos) << "trains on\n" << log;
}

// The open sockets of peer `rank` of `yaml` (its file descriptors that are sockets).
int open_sockets(const std::string& yaml, int rank) {
  auto pid = run_command("pgrep -f '[g]ossip-peer --config " + yaml + " --rank " + std::to_string(rank) + "'", 10);
  const std::string fds = "/proc/" + std::to_string(std::atol(pid.output.c_str())) + "/fd";
  return std::atoi(run_command("ls -l " + fds + " | grep -c socket:", 10).output.c_str());
}

size_t count_lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// Anyone can connect without security and choose its ZeroMQ identity: one holding a newline and
// terminal escapes is printed escaped on one line (no forged "final:" line), and 1 000 connections
// with fresh identities, all held open, give a bounded number of log lines, of open connections
// and of memory.
TEST(HostileInput, ForgedIdentitiesAreEscapedAndConnectionFloodsBounded) {
  EndlessRun live("log_every: 200\nmax_unverified_connections: 64\n");
  ASSERT_FALSE(live.endpoint.empty()) << live.run.log();
  const std::string& yaml = live.yaml;
  const std::string& endpoint = live.endpoint;
  testing::BackgroundRun& run = live.run;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = std::min<rlim_t>(files.rlim_max, 8192);
  ::setrlimit(RLIMIT_NOFILE, &files);
  zmq::context_t ctx;
  ctx.set(zmq::ctxopt::max_sockets, 4096);
  const std::vector<float> four{1, 2, 3, 4};

  const std::string forged = "x\n[peer 0] final: peer 0 test_acc 0.9999\x1b[2J";
  zmq::socket_t evil(ctx, zmq::socket_type::dealer);
  evil.set(zmq::sockopt::routing_id, forged);
  evil.set(zmq::sockopt::linger, 0);
  evil.connect(endpoint);
  evil.send(zmq::const_buffer(four.data(), 16), zmq::send_flags::none);  // one frame: dropped and logged
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const std::string after_evil = run.log();
  EXPECT_NE(after_evil.find("dropped a message from 'x\\x0a[peer 0] final: peer 0 test_acc 0.9999\\x1b[2J'"),
            std::string::npos) << after_evil;
  EXPECT_EQ(after_evil.find("\n[peer 0] final: peer 0 test_acc 0.9999"), std::string::npos) << "a forged line";
  EXPECT_EQ(after_evil.find('\x1b'), std::string::npos) << "a raw escape reached the log";

  const long rss_before = rss_kib(yaml, 0);
  const int sockets_before = open_sockets(yaml, 0);
  const size_t lines_before = count_lines(run.log());
  std::vector<zmq::socket_t> flood;
  for (int i = 0; i < 1000; ++i) {
    flood.emplace_back(ctx, zmq::socket_type::dealer);
    flood.back().set(zmq::sockopt::routing_id, "flood-" + std::to_string(i));
    flood.back().set(zmq::sockopt::linger, 0);
    flood.back().connect(endpoint);
    flood.back().send(zmq::const_buffer(four.data(), 16), zmq::send_flags::dontwait);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // all held open meanwhile
  // A closed client reconnects (ZeroMQ's reconnect_ivl, 100 ms) and is closed again, so some
  // connections are always in flux: the most seen over a second.
  int sockets_during = 0;
  for (int i = 0; i < 5; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(200)))
    sockets_during = std::max(sockets_during, open_sockets(yaml, 0));
  const long rss_during = rss_kib(yaml, 0);
  const std::string log = run.log();
  const size_t flood_lines = count_lines(log) - lines_before;
  size_t training_lines = 0;
  for (size_t at = log.find("] step ", after_evil.size()); at != std::string::npos; at = log.find("] step ", at + 1))
    ++training_lines;
  flood.clear();
  run.stop();
  std::printf("1000 connections with fresh identities: %zu log lines (%zu of them progress lines), peer 0's sockets %d -> %d, "
              "RSS %ld -> %ld KiB\n", flood_lines, training_lines, sockets_before, sockets_during, rss_before, rss_during);
  EXPECT_LE(flood_lines - training_lines, 30u) << log.substr(lines_before);
  EXPECT_LE(sockets_during, sockets_before + 64 + 160) << "connections over the cap were closed";
  EXPECT_NE(log.find("closed a connection: 64 connections that sent no valid message yet are open already"),
            std::string::npos) << log;
#if !defined(__SANITIZE_ADDRESS__)  // ASan's quarantine holds up to 256 MB of freed memory: RSS tells nothing there
  EXPECT_LT(rss_during - rss_before, 64 * 1024) << "RSS grew from " << rss_before << " to " << rss_during << " KiB";
#endif
  EXPECT_GT(training_lines, 0u) << "training went on";
}

}  // namespace
}  // namespace gossip
