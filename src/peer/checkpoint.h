// Durable per-peer checkpoints: model, optimiser state, algorithm state, step and membership.
// A checkpoint is written to a temporary file, fsync'ed, renamed over its final name and the
// directory fsync'ed, so a peer killed at any moment leaves every earlier checkpoint intact; the
// newest kCheckpointsKept are kept. Each carries a CRC32C of its bytes.
//
// Files are named by the member's id, which never changes (its rank does, at a view change):
// dir/peer-ID.step-S.ckpt while the membership is the YAML's (epoch 0; there id = rank), and
// dir/peer-ID.epoch-E.step-S.ckpt once it has changed. A run resumes with the YAML's membership,
// so only the first kind is resumable; the second kind is kept apart (its own newest
// kCheckpointsKept) and never deletes the first, so a crash after a view change still resumes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gossip::peer {

struct Checkpoint {
  int64_t step = 0;       // steps completed
  uint32_t epoch = 0;     // membership epoch at that step
  int rank = 0;           // this peer's rank in that membership
  int peers = 0;          // number of peers in it
  std::vector<float> params;    // the model's parameter buffer
  std::vector<float> optimizer_state;  // SGD: the momentum; AdamW: both moments and the step count
  std::vector<float> extra;     // the algorithm's state (push-sum: numerator, then the weight)
};

inline constexpr int kCheckpointsKept = 2;

// Creates `dir` if needed; throws gossip::Error naming it when it cannot be created or written
// (at start-up, so a wrong checkpoint.dir is not found out at the first checkpoint).
void prepare_checkpoint_dir(const std::string& dir);
// The file of member `id`'s checkpoint at `step`, written in membership epoch `epoch`.
std::string checkpoint_path(const std::string& dir, int id, int64_t step, uint32_t epoch = 0);
// Writes member `id`'s checkpoint `c` durably (see above) and deletes its checkpoints of the same
// kind (epoch 0, or later epochs) older than the newest kept, and any of a later step than `c`'s
// (left by a run this one was resumed from before them).
// Throws gossip::Error naming the file on any I/O failure.
void write_checkpoint(const std::string& dir, int id, const Checkpoint& c);
// Steps of member `id`'s resumable (epoch 0) checkpoint files in `dir`, newest first (not yet verified).
std::vector<int64_t> list_checkpoints(const std::string& dir, int id);
// Steps of member `id`'s checkpoint files written after a view change (epoch > 0), newest first.
std::vector<int64_t> list_later_checkpoints(const std::string& dir, int id);
// Reads and verifies one file; nullopt with *problem set when it is missing, short or damaged.
std::optional<Checkpoint> read_checkpoint(const std::string& path, std::string* problem);
// The newest intact resumable checkpoint of `rank` in `dir` (damaged ones are logged and skipped).
std::optional<Checkpoint> newest_checkpoint(const std::string& dir, int rank);
// Throws gossip::Error naming `source` unless `c` can continue this run: `floats` parameters,
// rank `rank` of `peers` in the YAML's membership (epoch 0), a step within `total_steps`.
void check_resumable(const Checkpoint& c, const std::string& source, size_t floats, int rank, int peers,
                     int64_t total_steps);

}  // namespace gossip::peer
