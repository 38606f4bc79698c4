#include "transport/zmq/lent_answers.h"

#include <unistd.h>

#include <utility>

namespace gossip::peer {

void LentAnswers::post(LentAnswer answer) noexcept {
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  try {
    answers_.push_back(std::move(answer));
  } catch (...) {
    return;  // out of memory: the lender waits for its chunk until its timeout, as for a lost answer
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

std::vector<LentAnswer> LentAnswers::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(answers_, {});
}

bool LentAnswers::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !answers_.empty();
}

void LentAnswers::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  answers_.clear();
}

void LentAnswers::refuse_from(int lender) {
  std::lock_guard<std::mutex> lock(mutex_);
  refused_.insert(lender);
}

bool LentAnswers::refused(int lender) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_.count(lender) != 0;
}

}  // namespace gossip::peer
