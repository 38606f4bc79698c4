#include "transport/membership_port.h"

namespace gossip::peer {

void LastDecision::set(uint32_t epoch, std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  epoch_ = epoch;
  text_ = std::make_shared<const std::string>(std::move(text));
}

void LastDecision::set_cut_off(uint32_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  cut_off_epoch_ = epoch;
}

bool LastDecision::answers(const Header& h, uint32_t current_epoch) const {
  if (h.kind != MessageKind::kView) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  return h.epoch < current_epoch || h.epoch == cut_off_epoch_;
}

std::optional<OutMessage> LastDecision::answer(const Header& h) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (h.kind != MessageKind::kView || h.tag != kViewProposal) return std::nullopt;
  if (h.epoch == cut_off_epoch_)
    return text_message(MessageKind::kView, h.epoch, 0, kViewCutOff,
                        std::make_shared<const std::string>(pad_text("cut off\n")));
  if (h.epoch != epoch_ || !text_) return std::nullopt;
  return text_message(MessageKind::kView, h.epoch, 0, kViewDecision, text_);
}

}  // namespace gossip::peer
