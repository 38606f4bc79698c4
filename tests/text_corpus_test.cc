// Byte-level text for language models: file order, the held-out part, errors that name the file,
// the peers' parts and the training windows; and Debian's fortunes as the default corpus.
#include "model/text_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "process_util.h"

namespace gossip::model {
namespace {

using testing::TempDir;

std::string bytes_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

TEST(TextCorpus, FilesAreReadInOrderAndTheLastPartIsHeldOut) {
  TempDir d;
  const TextCorpus c = load_text({d.write("b", "abc"), d.write("a", "defghij")}, 0.2);
  EXPECT_EQ(bytes_of(c.train), "abcdefgh");
  EXPECT_EQ(bytes_of(c.validation), "ij");
  EXPECT_EQ(c.files.size(), 2u);
}

void expect_error_naming(const std::vector<std::string>& files, const std::string& name, const std::string& what) {
  try {
    (void)load_text(files, 0.05);
    ADD_FAILURE() << "no error for " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(TextCorpus, AMissingEmptyOrNonFileIsAnErrorNamingIt) {
  TempDir d;
  const std::string good = d.write("good", std::string(1000, 'x'));
  expect_error_naming({good, d.path() + "/missing"}, d.path() + "/missing", "missing");
  expect_error_naming({d.write("empty", ""), good}, d.path() + "/empty", "empty");
  std::filesystem::create_directory(d.path() + "/dir");
  expect_error_naming({good, d.path() + "/dir"}, d.path() + "/dir", "not a regular file");
  expect_error_naming({d.write("tiny", "abc")}, d.path() + "/tiny", "too short");
}

TEST(TextCorpus, TextFilesOfADirectorySkipStrfileIndexesAndAreSorted) {
  TempDir d;
  d.write("zen", "z");
  d.write("art", "a");
  d.write("art.dat", "index");
  std::filesystem::create_symlink(d.path() + "/art", d.path() + "/art.u8");
  std::filesystem::create_directory(d.path() + "/sub");
  EXPECT_EQ(text_files_in(d.path()), (std::vector<std::string>{d.path() + "/art", d.path() + "/zen"}));
  EXPECT_THROW(text_files_in(d.path() + "/sub"), Error);          // nothing in it
  EXPECT_THROW(text_files_in(d.path() + "/no-such-dir"), Error);
}

TEST(TextCorpus, PartsTileTheTrainingBytesWithoutOverlap) {
  for (int n = 1; n <= 7; ++n) {
    size_t next = 0;
    for (int r = 0; r < n; ++r) {
      const BytePart p = text_part(1000, n, r);
      EXPECT_EQ(p.begin, next) << n << " " << r;
      EXPECT_LE(p.end - p.begin, 1000u / n + 1);
      EXPECT_GE(p.end - p.begin, 1000u / n);
      next = p.end;
    }
    EXPECT_EQ(next, 1000u);
  }
}

// Window starts fall inside the peer's part with room for context + 1 bytes, and are the seed's.
TEST(TextCorpus, WindowStartsAreInsideThePeersPart) {
  const BytePart part{300, 400};
  const int context = 8, batch = 2000;
  std::vector<int64_t> starts(batch), again(batch);
  std::mt19937_64 rng(5), same(5);
  draw_windows(1000, part, context, batch, rng, starts.data());
  for (int64_t s : starts) {
    EXPECT_GE(s, 300);
    EXPECT_LE(s, 400 - context - 1);
  }
  EXPECT_EQ(*std::min_element(starts.begin(), starts.end()), 300);  // both ends are drawn
  EXPECT_EQ(*std::max_element(starts.begin(), starts.end()), 391);
  draw_windows(1000, part, context, batch, same, again.data());
  EXPECT_EQ(again, starts);  // determined by the seed
  EXPECT_THROW(draw_windows(1000, {300, 305}, context, 1, rng, starts.data()), Error);
  EXPECT_THROW(draw_windows(350, part, context, 1, rng, starts.data()), Error);  // a part past the text's end
}

TEST(TextCorpus, DebiansFortunesAreTheDefaultCorpus) {
  const std::vector<std::string> files = text_files_in(kFortunesDir);
  ASSERT_GT(files.size(), 3u);
  for (const std::string& f : files) {
    EXPECT_NE(f.substr(f.size() - 4), ".dat") << f;
    EXPECT_NE(f.substr(f.size() - 3), ".u8") << f;  // links to the same text
  }
  const TextCorpus c = load_text(files);
  const double held_out = double(c.validation.size()) / double(c.train.size() + c.validation.size());
  EXPECT_NEAR(held_out, 0.05, 0.001);
  EXPECT_GT(c.train.size(), 1000000u);
}

}  // namespace
}  // namespace gossip::model
