#include "transport/membership_port.h"

namespace gossip::peer {

void LastDecision::set(uint32_t epoch, std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  epoch_ = epoch;
  text_ = std::make_shared<const std::string>(std::move(text));
}

std::optional<OutMessage> LastDecision::answer(const Header& h) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (h.kind != MessageKind::kView || h.tag != 0 || h.epoch != epoch_ || !text_)
    return std::nullopt;
  return text_message(MessageKind::kView, h.epoch, 0, 1, text_);
}

}  // namespace gossip::peer
