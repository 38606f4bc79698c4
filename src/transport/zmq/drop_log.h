// Log lines about what the comm thread drops or refuses (malformed messages, unknown senders,
// connections over the cap) come from the network, so anyone can cause them: they are escaped
// (escape_for_log), rate-limited for the whole peer, and summarised, so no sender can flood the
// log or grow memory (DropLog, comm thread only). What was dropped from each member is also kept
// for the error its missing messages end in (DropsByMember).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace gossip::peer {

class DropLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kLinesPerWindow = 10;     // detailed lines per window, all senders together
  static constexpr int kLinesPerSender = 5;      // of which one sender gets at most this many
  static constexpr int kRefusalLinesPerWindow = 3;  // refused connections, on top (their own budget)
  static constexpr size_t kMaxSenders = 256;     // the per-sender table is cleared when it reaches this
  static constexpr std::chrono::seconds kWindow{10};

  // One drop by `sender` (raw bytes; escaped here), described by `what`: logged as
  // "<prefix>dropped a message from '<sender>': <what>" while the budgets last, else counted.
  void dropped(const std::string& prefix, const std::string& sender, const std::string& what, Clock::time_point now);
  // Counts a refusal (e.g. a connection over the cap) the same way, logged as `line`.
  void refused(const std::string& prefix, const std::string& line, Clock::time_point now);
  // At the end of each window with suppressed lines, one summary line; call it every loop turn.
  void tick(const std::string& prefix, Clock::time_point now);

  uint64_t lines_logged() const { return lines_; }
  size_t senders_tracked() const { return per_sender_.size(); }

 private:
  bool take_budget(const std::string& sender);  // within the window tick() opened
  void emit(const std::string& line);

  Clock::time_point window_start_{};
  int window_lines_ = 0;
  int window_refusals_ = 0;
  uint64_t suppressed_ = 0;        // drops and refusals not logged in this window
  uint64_t suppressed_refusals_ = 0;
  std::map<std::string, int> per_sender_;  // lines logged per sender (bounded: kMaxSenders)
  uint64_t lines_ = 0;
};

// How many messages were dropped from each member connection ("r<id>") and why the last one was,
// and whether the member's heartbeats carried another digest of the shared settings than ours,
// for the error a neighbour's missing message ends in (Transport::dropped_from): a peer set up
// differently (another protocol, model shape, checksum setting or YAML) is then named as such
// rather than taken for a dead one. Written by the comm thread, read by the training thread;
// bounded like DropLog's table. The id is only what the connection calls itself.
class DropsByMember {
 public:
  static constexpr size_t kMaxMembers = 256;  // the table is cleared when it reaches this

  // A drop from `connection` (a routing id) for reason `why`; connections not named r<id> are not kept.
  void note(const std::string& connection, const std::string& why);
  // Member `id`'s heartbeats carry another settings digest than ours: true the first time.
  bool note_other_settings(int id);
  // "N message(s) from connection 'r<id>' were dropped here, the last: <why>", and/or that its
  // heartbeats say it was started with other shared settings; "" when neither.
  std::string of(int id) const;

 private:
  struct Entry {
    uint64_t count = 0;
    std::string last;
    bool other_settings = false;
  };
  Entry& entry_of(int id);  // caller holds mutex_; clears the table when it is full
  mutable std::mutex mutex_;
  std::map<int, Entry> entries_;  // guarded by mutex_
};

}  // namespace gossip::peer
