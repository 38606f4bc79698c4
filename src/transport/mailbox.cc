#include "transport/mailbox.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"

namespace gossip::peer {

void Mailbox::put(InMessage message, bool interrupt) {
  const MatchKey key{message.header.kind, static_cast<int>(message.header.sender),
                     message.header.round, message.header.tag, message.header.epoch};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[key].push_back(std::move(message));
    if (interrupt) interrupted_ = true;
  }
  arrived_.notify_all();
}

std::optional<InMessage> Mailbox::take(const MatchKey& key, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (error_) std::rethrow_exception(error_);
    if (interrupted_) throw MembershipInterrupt{};
    auto it = queues_.find(key);
    if (it != queues_.end() && !it->second.empty()) {
      InMessage m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      return m;
    }
    if (arrived_.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
      auto again = queues_.find(key);
      if (again == queues_.end() || again->second.empty()) return std::nullopt;
    }
  }
}

bool Mailbox::ready(const MatchKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  auto it = queues_.find(key);
  return it != queues_.end() && !it->second.empty();
}

void Mailbox::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = error;
  }
  arrived_.notify_all();
}

void Mailbox::interrupt() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    interrupted_ = true;
  }
  arrived_.notify_all();
}

void Mailbox::acknowledge() {
  std::lock_guard<std::mutex> lock(mutex_);
  interrupted_ = false;
}

std::optional<InMessage> Mailbox::take_any(const std::vector<MessageKind>& kinds, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (error_) std::rethrow_exception(error_);
    for (auto it = queues_.begin(); it != queues_.end(); ++it) {
      if (std::find(kinds.begin(), kinds.end(), it->first.kind) == kinds.end() || it->second.empty()) continue;
      InMessage m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      return m;
    }
    if (arrived_.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline) return std::nullopt;
  }
}

bool Mailbox::has_kind(MessageKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [k, q] : queues_)
    if (k.kind == kind && !q.empty()) return true;
  return false;
}

void Mailbox::drop_before_epoch(uint32_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = queues_.begin(); it != queues_.end();) {
    const bool epochless = it->first.kind == MessageKind::kJoin || it->first.kind == MessageKind::kSuspect;
    if (it->first.epoch < epoch && !epochless) it = queues_.erase(it);
    else ++it;
  }
}

void Mailbox::for_each(const std::function<void(InMessage&, bool& keep)>& fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, queue] : queues_)
    std::erase_if(queue, [&](InMessage& m) {
      bool keep = true;
      fn(m, keep);
      return !keep;
    });
}

size_t Mailbox::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [k, q] : queues_) n += q.size();
  return n;
}

void privatize(InMessage& m) {
  if (!m.shared) return;
  const size_t bytes = m.bytes();
  std::shared_ptr<void> values(std::malloc(std::max<size_t>(bytes, 1)), std::free);
  if (!values) throw Error("transport", "out of memory for a private copy of a " + std::to_string(bytes) + "-byte chunk");
  if (bytes) std::memcpy(values.get(), m.data, bytes);
  m.data = static_cast<const float*>(values.get());
  m.owner = std::move(values);  // the hold on the sender's region goes (answering it, if lent)
  m.shared = false;
}

}  // namespace gossip::peer
