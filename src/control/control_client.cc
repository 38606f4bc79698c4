#include "control/control_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/zmq/frames.h"

namespace gossip::peer {

ControlClient::ControlClient(zmq::context_t& context, std::string endpoint, const std::string& server_key,
                             const std::string& own_public, const std::string& own_secret)
    : endpoint_(std::move(endpoint)), socket_(context, zmq::socket_type::dealer) {
  if (std::optional<std::string> why = endpoint_problem(endpoint_))
    throw Error(escape_for_log(endpoint_), "cannot ask this peer: the endpoint " + *why);
  socket_.set(zmq::sockopt::linger, 0);
  if (!server_key.empty()) {
    socket_.set(zmq::sockopt::curve_serverkey, server_key);
    socket_.set(zmq::sockopt::curve_publickey, own_public);
    socket_.set(zmq::sockopt::curve_secretkey, own_secret);
  }
  socket_.set(zmq::sockopt::routing_id, "tool-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(reinterpret_cast<uintptr_t>(this) & 0xFFFFFF));
  socket_.connect(endpoint_);
}

ControlAnswer ControlClient::request(ControlOp op, const std::string& json, double timeout_s) {
  const std::string text = pad_text(json);
  Header h;
  h.kind = MessageKind::kControlRequest;
  h.sender = 0xFFFFFFFFu;  // not a peer
  h.round = ++sequence_;
  h.tag = static_cast<uint32_t>(op);
  h.payload_bytes = static_cast<uint32_t>(text.size());
  h.total_floats = text.size() / sizeof(float);
  if (!send_frames(socket_, h, text.data(), text.size()))
    throw Error(endpoint_, "cannot queue a request (is the peer running?)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0)
      throw Error(endpoint_, "no answer within " + number_text(timeout_s) + " s (is the peer running?)");
    std::vector<zmq::message_t> frames;
    do {
      frames.emplace_back();
      (void)socket_.recv(frames.back(), zmq::recv_flags::none);
    } while (socket_.get(zmq::sockopt::rcvmore));
    if (frames.size() != 2) continue;
    Header r;
    auto problem = validate_message(frames[0].data(), frames[0].size(), frames[1].data(), frames[1].size(), &r);
    if (problem) throw Error(endpoint_, "malformed answer: " + *problem);
    if (r.kind != MessageKind::kControlReply || r.round != sequence_) continue;  // stale
    ControlAnswer a;
    if (r.weight == 1.0) {
      a.is_values = true;
      a.values.resize(frames[1].size() / sizeof(float));
      if (!a.values.empty()) std::memcpy(a.values.data(), frames[1].data(), a.values.size() * sizeof(float));
    } else {
      a.text.assign(static_cast<const char*>(frames[1].data()), frames[1].size());
      // Our peers answer in printable ASCII (control.cc escapes the rest): anything else is not
      // printed, so no answer can write terminal escapes or extra lines into the tool's output.
      const auto bad =
          std::find_if(a.text.begin(), a.text.end(), [](char c) { return !is_printable_ascii(static_cast<unsigned char>(c)); });
      if (bad != a.text.end())
        throw Error(endpoint_, "malformed answer: byte 0x" + hex_byte(static_cast<unsigned char>(*bad)) + " at offset " +
                                   std::to_string(bad - a.text.begin()) + " of its text (expected printable JSON)");
    }
    return a;
  }
}

std::vector<std::string> json_string_array(const std::string& json, const std::string& field) {
  std::vector<std::string> out;
  size_t at = json.find("\"" + field + "\"");
  if (at == std::string::npos) return out;
  at = json.find('[', at);
  const size_t end = json.find(']', at);
  if (at == std::string::npos || end == std::string::npos) return out;
  for (size_t q = json.find('"', at); q != std::string::npos && q < end; q = json.find('"', q + 1)) {
    const size_t close = json.find('"', q + 1);
    if (close == std::string::npos || close > end) break;
    out.push_back(json.substr(q + 1, close - q - 1));
    q = close;
  }
  return out;
}

}  // namespace gossip::peer
