// Replays the fuzzer's corpus (tests/fuzz/corpus, grown by tests/fuzz/run.sh) through the same
// entry point on every build, so inputs that once crashed keep being checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace {

TEST(FuzzCorpus, EveryInputIsHandled) {
  namespace fs = std::filesystem;
  int replayed = 0, regressions = 0;
  for (const auto& entry : fs::directory_iterator(std::string(GOSSIP_SOURCE_DIR) + "/tests/fuzz/corpus")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    gossip::fuzz::fuzz_one(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++replayed;
    regressions += entry.path().filename().string().rfind("regression-", 0) == 0;
  }
  EXPECT_GE(replayed, 5);
  EXPECT_GE(regressions, 2) << "the inputs behind fixed fuzzer findings are kept";
}

}  // namespace
