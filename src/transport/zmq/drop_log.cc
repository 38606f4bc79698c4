#include "transport/zmq/drop_log.h"

#include "common/log.h"

namespace gossip::peer {

bool DropLog::take_budget(const std::string& sender) {
  if (window_lines_ >= kLinesPerWindow) return false;
  if (!sender.empty()) {
    auto it = per_sender_.find(sender);
    if (it == per_sender_.end()) {
      if (per_sender_.size() >= kMaxSenders) per_sender_.clear();  // bounded; the window budget still holds
      it = per_sender_.emplace(sender, 0).first;
    }
    if (it->second >= kLinesPerSender) return false;
    ++it->second;
  }
  ++window_lines_;
  return true;
}

void DropLog::emit(const std::string& line) {
  ++lines_;
  log(line);
}

void DropLog::dropped(const std::string& prefix, const std::string& sender, const std::string& what,
                      Clock::time_point now) {
  tick(prefix, now);
  if (take_budget(sender))
    emit(prefix + "dropped a message from '" + escape_for_log(sender) + "': " + escape_for_log(what, 200));
  else
    ++suppressed_;
}

void DropLog::refused(const std::string& prefix, const std::string& line, Clock::time_point now) {
  tick(prefix, now);
  if (window_refusals_ < kRefusalLinesPerWindow) {
    ++window_refusals_;
    emit(prefix + line);
  } else {
    ++suppressed_;
    ++suppressed_refusals_;
  }
}

void DropLog::tick(const std::string& prefix, Clock::time_point now) {
  if (window_start_ == Clock::time_point{}) window_start_ = now;  // the first window
  if (now - window_start_ < kWindow) return;
  if (suppressed_ > 0)
    emit(prefix + std::to_string(suppressed_) + " more dropped messages or refused connections (" +
         std::to_string(suppressed_refusals_) + " connections) in the last " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - window_start_).count()) +
         " s were not logged one by one");
  window_start_ = now;
  window_lines_ = window_refusals_ = 0;
  suppressed_ = suppressed_refusals_ = 0;
}

// The id in a member's routing id "r<id>" (decimal, below 2^24 like a header's sender field); -1 otherwise.
static int member_id(const std::string& connection) {
  if (connection.size() < 2 || connection.size() > 9 || connection[0] != 'r') return -1;
  if (connection.size() > 2 && connection[1] == '0') return -1;  // "r01" is no member's name
  int id = 0;
  for (size_t i = 1; i < connection.size(); ++i) {
    if (connection[i] < '0' || connection[i] > '9') return -1;
    id = id * 10 + (connection[i] - '0');
  }
  return id < (1 << 24) ? id : -1;
}

DropsByMember::Entry& DropsByMember::entry_of(int id) {
  if (entries_.size() >= kMaxMembers && entries_.count(id) == 0) entries_.clear();  // bounded
  return entries_[id];
}

void DropsByMember::note(const std::string& connection, const std::string& why) {
  const int id = member_id(connection);
  if (id < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entry_of(id);
  ++e.count;
  e.last = why;
}

bool DropsByMember::note_other_settings(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entry_of(id);
  const bool first = !e.other_settings;
  e.other_settings = true;
  return first;
}

std::string DropsByMember::of(int id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return "";
  const Entry& e = it->second;
  std::string text;
  if (e.count > 0)
    text = std::to_string(e.count) + (e.count == 1 ? " message" : " messages") + " from connection 'r" +
           std::to_string(id) + "' " + (e.count == 1 ? "was" : "were") + " dropped here, the last: " + e.last;
  if (e.other_settings)
    text += std::string(text.empty() ? "" : "; and ") + "its heartbeats say it was started with other shared settings "
            "than this peer (algorithm, topology, wire, checksum, log_every, ...: another YAML?)";
  return text;
}

}  // namespace gossip::peer
