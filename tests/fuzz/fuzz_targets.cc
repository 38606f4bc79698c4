#include "fuzz_targets.h"

#include <map>
#include <string>

#include "control/control.h"
#include "control/control_client.h"
#include "membership/membership.h"
#include "wire/wire_format.h"

namespace gossip::fuzz {

void fuzz_one(const uint8_t* data, size_t size) {
  if (size == 0) return;
  if (data[0] % 2 == 0) {
    const size_t head = size - 1 < peer::kHeaderBytes ? size - 1 : peer::kHeaderBytes;
    peer::Header h;
    auto problem = peer::validate_message(data + 1, head, data + 1 + head, size - 1 - head, &h);
    if (!problem) {
      // A message that passes must describe itself consistently.
      const size_t frame = size - 1 - head;
      const bool lent = (h.flags & peer::kFlagLent) != 0;
      if ((lent ? frame != peer::kLentRefBytes || !peer::is_vector_kind(h.kind) : h.payload_bytes != frame) ||
          h.payload_bytes % peer::element_bytes(h.dtype) != 0 ||
          h.offset + h.payload_bytes / peer::element_bytes(h.dtype) > h.total_floats)
        __builtin_trap();
    }
    return;
  }
  if (data[0] % 4 == 3) {
    const std::string text(reinterpret_cast<const char*>(data) + (size > 1 ? 2 : 1), size > 1 ? size - 2 : 0);
    if (size > 1 && data[1] % 2 == 0) {
      std::map<uint64_t, peer::JoinRequest> joins;
      if (auto p = peer::parse_proposal(text, &joins)) {
        // What parses must print and parse back to the same proposal.
        std::map<uint64_t, peer::JoinRequest> again;
        auto q = peer::parse_proposal(peer::proposal_text(*p, joins), &again);
        if (!q || !(*q == *p) || q->ready != p->ready || q->round != p->round) __builtin_trap();
      }
    } else if (auto w = peer::parse_welcome(text)) {
      if (w->view.rank_of(w->id) < 0) __builtin_trap();
    }
    return;
  }
  static peer::ControlState state = [] {
    peer::ControlInfo info;
    info.n = 4;
    info.total_steps = 1000;
    return peer::ControlState(info, nullptr);
  }();
  const uint32_t op = size > 1 ? data[1] % 5 : 0;
  const std::string text(reinterpret_cast<const char*>(data) + (size > 1 ? 2 : 1), size > 1 ? size - 2 : 0);
  peer::ControlReply r = state.handle(op, text);
  if (r.floats && !r.values) __builtin_trap();
  const float x[4] = {1, 2, 3, 4};
  for (int64_t round = 0; round < 3; ++round)
    if (state.snapshot_due(round)) state.capture(round, x, 4);
  (void)peer::json_string_array(text, "members");
  (void)peer::ControlState::json_number(text, "round");
}

}  // namespace gossip::fuzz
