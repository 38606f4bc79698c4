#include "transport/zmq/frames.h"

namespace gossip::peer {

bool send_frames(zmq::socket_t& socket, Header h, const void* payload, size_t bytes, FrameOptions options) {
  if (options.unchecked) h.flags |= kFlagUnchecked;
  if (!options.checksum_ready || options.unchecked) h.checksum = message_checksum(h, payload, bytes);
  uint8_t head[kHeaderBytes];
  encode_header(h, head);
  if (options.identity) {
    if (!socket.send(zmq::const_buffer(options.identity->data(), options.identity->size()),
                     zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return false;
    socket.send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore);
  } else if (!socket.send(zmq::const_buffer(head, kHeaderBytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
    return false;
  }
  if (!options.zero_copy) {
    socket.send(zmq::const_buffer(payload, bytes), zmq::send_flags::none);
    return true;
  }
  // ZeroMQ reads straight from the owner's buffer and drops the reference when done.
  auto* keep = new Owner(std::move(options.zero_copy));
  zmq::message_t frame(const_cast<void*>(payload), bytes, [](void*, void* hint) { delete static_cast<Owner*>(hint); },
                       keep);
  socket.send(frame, zmq::send_flags::none);
  return true;
}

}  // namespace gossip::peer
