// The tool side of the control channel: one DEALER connected to one peer's endpoint, one request
// at a time, each with a deadline (a dead peer is an error naming it, never a hang).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "wire/wire_format.h"

namespace gossip::peer {

struct ControlAnswer {
  std::string text;           // JSON, when values is empty
  std::vector<float> values;  // a snapshot
  bool is_values = false;
};

class ControlClient {
 public:
  // `context` must outlive the client.
  // With `server_key` (the peer's Z85 public key) and `own` keys the connection uses CurveZMQ.
  ControlClient(zmq::context_t& context, std::string endpoint, const std::string& server_key = "",
                const std::string& own_public = "", const std::string& own_secret = "");
  // Sends `json` as operation `op` and waits up to timeout_s for the answer; throws gossip::Error
  // naming the endpoint on a timeout or a malformed answer.
  ControlAnswer request(ControlOp op, const std::string& json, double timeout_s);
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string endpoint_;
  zmq::socket_t socket_;
  uint64_t sequence_ = 0;  // matches answers to requests (stale answers are skipped)
};

// Strings of a JSON array field, e.g. "members": ["tcp://...", ...] (our own status format).
std::vector<std::string> json_string_array(const std::string& json, const std::string& field);

}  // namespace gossip::peer
