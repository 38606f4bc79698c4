#include "fuzz_targets.h"

#include <cstring>
#include <map>
#include <vector>
#include <string>

#include "algorithms/compressor.h"
#include "control/control.h"
#include "control/control_client.h"
#include "membership/membership.h"
#include "wire/wire_format.h"

namespace gossip::fuzz {
namespace {

// A compressed chunk that parses must stay inside its span when added (ASan watches).
void fuzz_compressed(const peer::Header& h, const uint8_t* payload) {
  if (h.total_floats - h.offset > (1u << 16)) return;
  std::vector<uint32_t> words(h.payload_bytes / 4);
  if (!words.empty()) std::memcpy(words.data(), payload, words.size() * 4);
  const peer::Compressor c{h.dtype, 0.25, 7};
  const peer::SpanKey key{h.round, h.sender, h.offset};
  peer::CompressedChunk chunk;
  if (chunk.parse(c, key, words.data(), words.size(), h.total_floats)) return;
  if (h.offset + chunk.span() > h.total_floats) __builtin_trap();
  std::vector<float> y(chunk.span());
  double sum = 0;
  (void)chunk.finite(&sum);
  chunk.add_to(0.5f, y.data());
}

}  // namespace

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
      const uint64_t values = peer::is_compressed(h.dtype) ? 0 : h.payload_bytes / peer::element_bytes(h.dtype);
      if ((lent ? frame != peer::kLentRefBytes || !peer::is_vector_kind(h.kind) : h.payload_bytes != frame) ||
          h.payload_bytes % peer::element_bytes(h.dtype) != 0 || h.offset > h.total_floats ||
          values > h.total_floats - h.offset)
        __builtin_trap();
      if (peer::is_compressed(h.dtype) && !lent) fuzz_compressed(h, data + 1 + head);
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
