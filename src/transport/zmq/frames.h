// One message on a ZeroMQ socket: an optional routing identity (a ROUTER's answer), the encoded
// header, the payload. The one place where a header is checksummed, encoded and sent.
#pragma once

#include <zmq.hpp>

#include "transport/transport.h"

namespace gossip::peer {

struct FrameOptions {
  const zmq::message_t* identity = nullptr;  // a ROUTER's answer goes to this connection
  bool checksum_ready = false;               // header.checksum was computed already
  Owner zero_copy;                           // set: the payload leaves without a copy, kept alive by it
  bool unchecked = false;                    // a vector chunk over a link that keeps bytes intact: kFlagUnchecked
};

// Stamps the checksum (unless ready; of the header alone when unchecked; h.payload_bytes is the
// caller's: a lent chunk's differs) and sends without blocking at the first
// frame: false when the socket would block there (then nothing is sent). ZeroMQ applies the
// high-water mark at the first frame only, so once it is accepted the others are too.
bool send_frames(zmq::socket_t& socket, Header h, const void* payload, size_t bytes, FrameOptions options = {});

}  // namespace gossip::peer
