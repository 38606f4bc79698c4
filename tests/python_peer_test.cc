// The Python module (src/python): Python peers started by gossip-launch CONFIG -- python3 SCRIPT
// mixing numpy buffers in place, and its errors. Skipped when the module was not built (no
// pybind11-dev / python3-dev, or a sanitizer build, which cannot load into python3).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "process_util.h"

namespace gossip {
namespace {

using testing::run_command;

const std::string kPythonPath = std::string(GOSSIP_BINARY_DIR) + "/python";
const std::string kPython = "/usr/bin/python3";

bool module_built() {
  namespace fs = std::filesystem;
  if (!fs::exists(kPythonPath + "/gossip/__init__.py")) return false;
  for (const auto& e : fs::directory_iterator(kPythonPath + "/gossip"))
    if (e.path().filename().string().rfind("_gossip", 0) == 0) return true;
  return false;
}

#define SKIP_WITHOUT_MODULE() \
  if (!module_built()) GTEST_SKIP() << "the Python module was not built (pybind11-dev, python3-dev)"

std::string with_module(const std::string& command) { return "env -u GOSSIP_CONFIG -u GOSSIP_RANK PYTHONPATH=" + kPythonPath + " " + command; }

// 4 Python peers on a ring (W = 1/3 each): every non-constant mode of a 4-ring has |λ| = 1/3, so
// each mix divides the consensus distance Ξ by exactly 9; average() then gives every peer the
// exact mean, and the launcher sees one final model.
TEST(PythonPeer, FourPeersMixNumpyBuffersInPlace) {
  SKIP_WITHOUT_MODULE();
  testing::TempDir dir;
  const std::string yaml =
      dir.write("ring.yaml", "peers: {count: 4, host: 127.0.0.1, base_port: 0}\ntopology: ring\nalgorithm: {kind: gossip}\n");
  const auto r = run_command(with_module("MIX_STEPS=3 " + testing::bin("gossip-launch") + " " + yaml + " -- " + kPython +
                                         " " + GOSSIP_SOURCE_DIR + "/tests/python/mix_numpy.py"),
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 of 4 peers succeeded, 1 distinct final model"), std::string::npos) << r.output;
  const std::regex line(R"(rank (\d) of 4 consensus before (\S+) after (\S+))");
  int peers = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it, ++peers) {
    const double before = std::stod((*it)[2]), after = std::stod((*it)[3]);
    EXPECT_GT(before, 1e6);
    EXPECT_NEAR(after / before, 1.0 / 729, 1e-2 / 729) << (*it)[0];
  }
  EXPECT_EQ(peers, 4) << r.output;
}

bool torch_available() { return run_command(kPython + " -c 'import torch'", 60).exit_code == 0; }

// 4 Python peers training a torch CNN whose parameters are views of one flat tensor: mixing the
// tensor mixes the model (the module reads back the averaged values), and the peers end as one.
TEST(PythonPeer, FourPeersMixATorchModel) {
  SKIP_WITHOUT_MODULE();
  if (!torch_available()) GTEST_SKIP() << "no python3-torch";
  testing::TempDir dir;
  const std::string yaml = dir.write(
      "exp.yaml", "peers: {count: 4, host: 127.0.0.1, base_port: 0}\ntopology: exponential\nalgorithm: {kind: gossip}\n");
  const auto r = run_command(with_module(testing::bin("gossip-launch") + " " + yaml + " -- " + kPython + " " +
                                         GOSSIP_SOURCE_DIR + "/tests/python/mix_torch.py"),
                             180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 of 4 peers succeeded, 1 distinct final model"), std::string::npos) << r.output;
  const std::regex line(R"(\[peer (\d)\] consensus (\S+) module_crc (\w+)[\s\S]*?\[peer \1\] final: peer \d params_crc (\w+))");
  int peers = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it, ++peers) {
    EXPECT_GT(std::stod((*it)[2]), 0.0) << "the peers trained on different data: their models must differ";
    EXPECT_EQ((*it)[3], (*it)[4]) << "the module's parameters are not the mixed tensor";
  }
  EXPECT_EQ(peers, 4) << r.output;
}

// Wrong buffers are Python exceptions naming the problem; the run's errors keep gossip's message.
TEST(PythonPeer, BadBuffersAreClearExceptions) {
  SKIP_WITHOUT_MODULE();
  testing::TempDir dir;
  const std::string yaml = dir.write("alone.yaml", "seed: 1\n");
  const std::string script = dir.write("bad.py", R"(
import numpy as np, gossip
def expect(what, f, kind):
    try:
        f()
    except kind as e:
        print(what, "->", type(e).__name__, e)
    else:
        print(what, "-> no exception")
x = np.ones(100, dtype=np.float32)
peer = gossip.Peer(x, config=")" + yaml + R"(", rank=0)
expect("float64", lambda: peer.mix(0, np.ones(100)), TypeError)
expect("strided", lambda: peer.mix(0, np.ones(200, dtype=np.float32)[::2]), ValueError)
expect("size", lambda: peer.mix(0, np.ones(99, dtype=np.float32)), RuntimeError)
expect("rank", lambda: gossip.Peer(x, config=")" + yaml + R"(", rank=3), RuntimeError)
expect("yaml", lambda: gossip.Peer(x, config="/nonexistent.yaml", rank=0), RuntimeError)
expect("env", lambda: gossip.Peer(x), RuntimeError)
print("alone mix", peer.mix(0, x), "size", peer.size)
)");
  const auto r = run_command(with_module(kPython + " " + script), 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* want : {"float64 -> TypeError gossip: the parameters must be float32",
                           "strided -> ValueError gossip: the parameters must be one contiguous buffer",
                           "size -> RuntimeError gossip::Peer: a buffer of 99 floats, but this run's model has 100",
                           "rank -> RuntimeError", "is not one of the 1 peers", "yaml -> RuntimeError /nonexistent.yaml",
                           "env -> RuntimeError gossip::Peer: GOSSIP_CONFIG is not set", "alone mix True size 1"})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
}

}  // namespace
}  // namespace gossip
