// The answers a ZmqTransport owes its lenders for chunks whose values are copied on the
// training thread (single copy, see ZmqTransport::receive): each such chunk waits in the mailbox
// holding a LentTicket, and whichever way the ticket goes — the values copied, the copy refused,
// or the message dropped unread — its answer is posted here for the comm thread to send. Shared
// by the transport and the tickets, so a ticket may outlive the transport (its answer is then
// dropped, as the transport's socket is gone).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace gossip::peer {

struct LentAnswer {
  int lender = -1;
  uint64_t token = 0;
  bool copied = true;    // false: refused (the lender sends the values over the socket)
  std::string identity;  // the ROUTER identity the reference came on (for answer_lent)
};

class LentAnswers {
 public:
  // `wake_fd`: the transport's eventfd, written after every post.
  explicit LentAnswers(int wake_fd) : wake_fd_(wake_fd) {}
  void post(LentAnswer answer) noexcept;
  std::vector<LentAnswer> take();
  bool pending() const;  // answers posted and not taken yet
  // The transport is going: later posts are dropped and the eventfd is not written again.
  void close();
  // Lenders whose memory could not be read on the training thread: every later chunk of theirs
  // waiting in the mailbox is refused too, so they send all of them again, in order.
  void refuse_from(int lender);
  bool refused(int lender) const;
  // Tickets not yet gone (lent chunks waiting in the mailbox, or being copied).
  int waiting() const { return waiting_.load(std::memory_order_relaxed); }
  void ticket_issued() { waiting_.fetch_add(1, std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  std::vector<LentAnswer> answers_;  // guarded by mutex_
  std::set<int> refused_;            // guarded by mutex_
  bool closed_ = false;              // guarded by mutex_
  std::atomic<int> waiting_{0};
  int wake_fd_;
};

// Held by a lent chunk's message (InMessage::owner) until its values are copied or it is dropped.
struct LentTicket {
  LentTicket(std::shared_ptr<LentAnswers> to, LentAnswer a) : answers(std::move(to)), answer(std::move(a)) {
    answers->ticket_issued();
  }
  ~LentTicket() { answers->post(std::move(answer)); }
  LentTicket(const LentTicket&) = delete;
  LentTicket& operator=(const LentTicket&) = delete;
  std::shared_ptr<LentAnswers> answers;
  LentAnswer answer;
};

}  // namespace gossip::peer
