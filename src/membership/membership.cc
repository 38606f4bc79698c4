#include "membership/membership.h"

#include <utility>

#include "common/log.h"

namespace gossip::peer {

Membership::Membership(MembershipPort& port, ViewTransport& view, double timeout_s, JoinTerms terms)
    : port_(&port), view_(&view), timeout_s_(timeout_s), terms_(std::move(terms)) {
  // A join request never interrupts a receive (it may yet be refused, and then an abandoned
  // collective could not be resumed); it is taken up at the next step, whose proposal to the
  // others does interrupt them.
  view.set_change_filter([this] { return pending(false); });
}

void Membership::take_suspicions() {
  // Runs on every step: the view is copied only when a suspicion note must be checked against it.
  std::optional<View> v;
  while (auto note = port_->mailbox().take_any({MessageKind::kSuspect}, Clock::now())) {
    if (!v) v = view_->view();
    if (v->rank_of(static_cast<int>(note->header.sender)) >= 0) deferred_.push_back(std::move(*note));
  }
}

bool Membership::pending(bool include_joins) {
  take_suspicions();
  for (const InMessage& m : deferred_)
    if (include_joins || m.header.kind != MessageKind::kJoin) return true;
  return port_->mailbox().has_kind(MessageKind::kView) ||
         (include_joins && port_->mailbox().has_kind(MessageKind::kJoin));
}

void Membership::send_text(int id, MessageKind kind, uint32_t epoch, uint64_t round, const std::string& text,
                           uint32_t tag) {
  port_->send(id, text_message(kind, epoch, round, tag, std::make_shared<const std::string>(pad_text(text))));
  if (kind == MessageKind::kView) ++view_messages_sent_;
}

void Membership::announce_leave(int64_t round) {
  const View v = view_->view();
  const int me = view_->self_id();
  const std::string text = "round " + std::to_string(round) + "\ngone " + std::to_string(me) + "\n";
  for (const Member& m : v.members)
    if (m.id != me) send_text(m.id, MessageKind::kView, v.epoch, static_cast<uint64_t>(round), text);
  log("peer ", me, ": leaving the run at round ", round, " (told ", v.members.size() - 1, " members)");
}

std::string Membership::describe_suspects() {
  take_suspicions();
  std::set<int> ids;
  for (const InMessage& m : deferred_)
    if (m.header.kind == MessageKind::kSuspect) ids.insert(static_cast<int>(m.header.sender));
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ", ") + std::string("peer ") + std::to_string(id) + " (" + port_->endpoint_of(id) + ")";
  return text;
}

}  // namespace gossip::peer
