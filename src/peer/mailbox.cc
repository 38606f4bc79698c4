#include "peer/mailbox.h"

namespace gossip::peer {

void Mailbox::put(InMessage message) {
  const MatchKey key{static_cast<MessageKind>(message.header.kind), static_cast<int>(message.header.sender),
                     message.header.round, message.header.tag};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[key].push_back(std::move(message));
  }
  arrived_.notify_all();
}

std::optional<InMessage> Mailbox::take(const MatchKey& key, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (error_) std::rethrow_exception(error_);
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

size_t Mailbox::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [k, q] : queues_) n += q.size();
  return n;
}

}  // namespace gossip::peer
