#include "transport/inproc/inproc_wire.h"

#include <algorithm>
#include <chrono>

namespace gossip::peer {

InprocWire::InprocWire(LinkModel model, std::function<void(int, InMessage)> arrive)
    : model_(model), arrive_(std::move(arrive)), random_(model.seed), thread_([this] { run(); }) {}

InprocWire::~InprocWire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void InprocWire::send(int from_slot, int to_slot, InMessage message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    if (message.header.kind == MessageKind::kView && unit(random_) < model_.loss) {
      ++lost_;
      return;
    }
    const double delay_s = model_.latency_s + model_.jitter_s * unit(random_);
    auto due = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay_s));
    Clock::time_point& last = last_due_[static_cast<uint64_t>(static_cast<uint32_t>(from_slot)) << 32 |
                                        static_cast<uint32_t>(to_slot)];
    due = std::max(due, last);  // never before an earlier message of the same link
    last = due;
    queue_.push({due, sent_++, to_slot, std::move(message)});
  }
  changed_.notify_one();
}

uint64_t InprocWire::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

void InprocWire::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<InFlight> due;
  while (!stopping_) {
    if (queue_.empty()) {
      changed_.wait(lock);
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (queue_.top().due > now) {
      // A copy: the wait releases the lock, and a send meanwhile may move the queue's storage.
      const Clock::time_point next = queue_.top().due;
      changed_.wait_until(lock, next);
      continue;
    }
    // Everything due goes out in one batch, outside the lock (an arrival may send an answer).
    while (!queue_.empty() && queue_.top().due <= now) {
      // (moving the message out leaves the ordering fields as they were, so the heap holds)
      due.push_back(std::move(const_cast<InFlight&>(queue_.top())));
      queue_.pop();
    }
    lock.unlock();
    for (InFlight& f : due) arrive_(f.to_slot, std::move(f.message));
    due.clear();
    lock.lock();
  }
}

}  // namespace gossip::peer
