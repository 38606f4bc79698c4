// What a transport asks when a control request (status, snapshot) arrives: the interface lives
// here, below the transports that call it; the control layer (control/control.h) implements it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gossip::peer {

struct ControlReply {
  bool floats = false;                         // values (snapshot) rather than JSON text
  std::string text;                            // JSON
  std::shared_ptr<const std::vector<float>> values;
};

// The comm thread calls this for each control request; it must not throw.
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  virtual ControlReply handle(uint32_t op, const std::string& request) noexcept = 0;
};

}  // namespace gossip::peer
