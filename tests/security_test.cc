// CurveZMQ: peers of a run with `security: {keys: DIR}` talk encrypted and accept only keys on the
// allow-list (every *.pub in DIR). An outsider can neither inject messages nor query a peer, and
// its attempt is logged.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <zmq.hpp>

#include "transport/zmq/curve_keys.h"
#include "wire/wire_format.h"
#include "process_util.h"

namespace gossip {
namespace {

using testing::capture_all;
using testing::read_file;
using testing::run_command;
using testing::TempDir;


// A 2-peer ring run with CurveZMQ keys from `keys`, training until stopped.
std::string secured_yaml(const TempDir& dir, const std::string& keys, int log_every, const std::string& algorithm) {
  return dir.write("run.yaml",
      "seed: 2\ndevice: cpu\nlog_every: " + std::to_string(log_every) + "\npeers: {count: 2, host: 127.0.0.1, base_port: 0}\n"
      "security: {keys: " + keys + "}\ntopology: ring\nalgorithm: " + algorithm + "\nmodel: {hidden: [32]}\n"
      "data: {dataset: synthetic, synthetic: {train: 4000, test: 200, dims: 32, classes: 4}}\n"
      "optimizer: {lr: 0.01, batch: 32, epochs: 100000}\n");
}

TEST(Security, OnlyAllowedKeysGetIn) {
  TempDir dir;
  const std::string keys = dir.path() + "/keys", other = dir.path() + "/other";
  ASSERT_EQ(run_command(testing::bin("gossip-keygen") + " " + keys + " --peers 2").exit_code, 0);
  ASSERT_EQ(run_command(testing::bin("gossip-keygen") + " " + other + " --name intruder").exit_code, 0);
  const std::string yaml = secured_yaml(dir, keys, 50, "gossip");
  testing::BackgroundRun run(yaml, dir.path() + "/run.log");
  const std::string endpoint = run.peer0_endpoint();
  ASSERT_FALSE(endpoint.empty()) << run.log();

  // A valid-looking gossip message, sent by (a) a CURVE client whose key is not allowed and
  // (b) a plain client.
  peer::Header h;
  h.kind = peer::MessageKind::kGossip;
  h.sender = 1;
  h.round = 1u << 30;
  h.total_floats = 2;
  const float payload[2] = {1e9f, -1e9f};
  h.payload_bytes = 8;
  h.checksum = peer::message_checksum(h, payload, 8);
  uint8_t head[peer::kHeaderBytes];
  peer::encode_header(h, head);
  zmq::context_t ctx;
  const peer::KeyPair intruder = peer::read_keypair(other + "/intruder.key");
  zmq::socket_t curve(ctx, zmq::socket_type::dealer), plain(ctx, zmq::socket_type::dealer);
  curve.set(zmq::sockopt::routing_id, "intruder");
  curve.set(zmq::sockopt::linger, 0);
  curve.set(zmq::sockopt::curve_serverkey, peer::read_public_key(keys + "/peer-0.pub"));
  curve.set(zmq::sockopt::curve_publickey, intruder.public_key);
  curve.set(zmq::sockopt::curve_secretkey, intruder.secret_key);
  plain.set(zmq::sockopt::routing_id, "plain");
  plain.set(zmq::sockopt::linger, 0);
  for (zmq::socket_t* s : {&curve, &plain}) {
    s->connect(endpoint);
    s->send(zmq::const_buffer(head, sizeof(head)), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    s->send(zmq::const_buffer(payload, 8), zmq::send_flags::dontwait);
  }
  // The consensus tool: refused without keys, served with the run's tool key.
  auto without = run_command(testing::bin("gossip-consensus") + " --peer " + endpoint + " --status --timeout 1", 30);
  auto with = run_command(testing::bin("gossip-consensus") + " --peer " + endpoint + " --keys " + keys + " --status", 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string text = run.log();
  run.stop();

  EXPECT_NE(text.find("refused a connection from 127.0.0.1: key " + intruder.public_key + " is not on the allow-list"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("dropped a message from 'intruder'"), std::string::npos) << "nothing got through";
  EXPECT_EQ(text.find("dropped a message from 'plain'"), std::string::npos) << "nothing got through";
  EXPECT_EQ(without.exit_code, 2) << without.output;
  EXPECT_EQ(with.exit_code, 0) << with.output;
  EXPECT_NE(with.output.find("\"rank\": 1"), std::string::npos) << with.output;
  const size_t refused = text.find("refused a connection");
  EXPECT_NE(text.find("] step ", refused), std::string::npos) << "training went on\n" << text;
}

// CHOCO's compressed chunks, the gradient tracker's messages and DiLoCo's outer all-reduce travel
// under CurveZMQ like any other, and the consensus tool (with the run's tool key) measures Ξ of
// such a run.
TEST(Security, ChocoGradientTrackingAndDilocoRunEncryptedAndAreMeasured) {
  for (const char* algorithm : {"{kind: choco, compressor: sign, consensus_step: 0.2}", "{kind: gossip, gradient_tracking: true}",
                                "{kind: diloco, inner_steps: 10, wire: bf16}"}) {
    TempDir dir;
    const std::string keys = dir.path() + "/keys";
    ASSERT_EQ(run_command(testing::bin("gossip-keygen") + " " + keys + " --peers 2").exit_code, 0);
    testing::BackgroundRun run(secured_yaml(dir, keys, 50, algorithm), dir.path() + "/run.log");
    const std::string endpoint = run.peer0_endpoint();
    ASSERT_FALSE(endpoint.empty()) << run.log();
    testing::wait_for_text(dir.path() + "/run.log", "] step 100/", 60);
    auto tool = run_command(testing::bin("gossip-consensus") + " --peer " + endpoint + " --keys " + keys, 60);
    const std::string text = run.log();
    run.stop();
    EXPECT_EQ(tool.exit_code, 0) << algorithm << "\n" << tool.output << text;
    // One row "round peers Ξ ...": both peers measured.
    EXPECT_EQ(capture_all(tool.output, R"(\n +\d+ +2 +([0-9.e+-]+) )").size(), 1u) << tool.output;
    EXPECT_EQ(text.find("dropped"), std::string::npos) << algorithm << "\n" << text;
    EXPECT_EQ(text.find("error"), std::string::npos) << algorithm << "\n" << text;
  }
}

// Elastic join under CurveZMQ: a newcomer whose key is on the allow-list joins (the members learn
// its key from the authenticated join request); one whose key is not can neither join nor get in.
TEST(Security, AllowedNewcomerJoinsAndAnOutsiderCannot) {
  TempDir dir;
  const std::string keys = dir.path() + "/keys", other = dir.path() + "/other";
  ASSERT_EQ(run_command(testing::bin("gossip-keygen") + " " + keys + " --peers 2").exit_code, 0);
  ASSERT_EQ(run_command(testing::bin("gossip-keygen") + " " + keys + " --name newcomer").exit_code, 0);
  ASSERT_EQ(run_command(testing::bin("gossip-keygen") + " " + other + " --name intruder").exit_code, 0);
  const std::string yaml = secured_yaml(dir, keys, 200, "{kind: gossip, timeout_s: 5}");
  testing::BackgroundRun run(yaml, dir.path() + "/run.log");
  const std::string endpoint = run.peer0_endpoint();
  ASSERT_FALSE(endpoint.empty()) << run.log();
  const std::string join = testing::bin("gossip-peer") + " --config " + yaml + " --join " + endpoint +
                           " --join-key " + keys + "/peer-0.pub --epochs 0.01 --key ";
  const testing::CommandResult outsider = run_command(join + other + "/intruder.key", 60);
  ASSERT_EQ(std::system((join + keys + "/newcomer.key > " + dir.path() + "/newcomer.log 2>&1 &").c_str()), 0);
  std::string newcomer;
  for (int i = 0; i < 300 && newcomer.find("] step ") == std::string::npos; ++i) {
    ::usleep(100000);
    newcomer = read_file(dir.path() + "/newcomer.log");
  }
  const std::string text = run.log();
  run_command("pkill -KILL -f '[g]ossip-peer --config " + yaml + " --join'", 10);
  run.stop();
  EXPECT_NE(outsider.exit_code, 0);
  EXPECT_NE(outsider.output.find("cannot join via " + endpoint), std::string::npos) << outsider.output;
  EXPECT_NE(text.find("refused a connection from 127.0.0.1: key " + peer::read_public_key(other + "/intruder.pub")),
            std::string::npos) << text;
  EXPECT_NE(newcomer.find("joined as peer 2"), std::string::npos) << newcomer;
  EXPECT_NE(newcomer.find("] step "), std::string::npos) << "the newcomer trains with the others\n" << newcomer;
  EXPECT_NE(text.find("epoch 1: 3 members"), std::string::npos) << text;
}

TEST(Security, MissingOrMalformedKeyFilesAreClearErrors) {
  TempDir dir;
  EXPECT_THROW(peer::read_keypair(dir.path() + "/none.key"), std::exception);
  const std::string bad = dir.write("bad.key", "public: short\n");
  try {
    peer::read_keypair(bad);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bad.key:1"), std::string::npos) << e.what();
  }
  peer::KeyPair k = peer::generate_keypair();
  peer::write_keypair(dir.path() + "/ok", k);
  EXPECT_EQ(peer::read_keypair(dir.path() + "/ok.key").secret_key, k.secret_key);
  EXPECT_EQ(peer::read_public_key(dir.path() + "/ok.pub"), k.public_key);
  EXPECT_EQ(peer::read_allowed_keys(dir.path()), std::vector<std::string>{k.public_key});
}

}  // namespace
}  // namespace gossip
