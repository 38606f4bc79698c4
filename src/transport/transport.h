// The abstract transport between peers (after gloo's transport/ interface). The ZeroMQ
// implementation (zmq_transport.h) sits beside it, and an in-process fake (inproc_transport.h)
// serves the tests. Sends are asynchronous and zero-copy; receives match on
// (kind, sender, round, tag) and wait until a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "wire/wire_format.h"

namespace gossip::peer {

using Clock = std::chrono::steady_clock;

// Keeps the bytes of an outgoing message alive until they have left: the transport holds a
// reference, so the sender may drop its own at once (zero-copy sends).
using Owner = std::shared_ptr<const void>;

struct OutMessage {
  // kind, round, tag, total_floats, offset, weight, dtype: filled by the caller; sender,
  // payload_bytes and checksum: stamped by the transport alone; epoch: by ViewTransport for the
  // algorithms' messages (membership's own name the epoch they change: text_message).
  Header header;
  const void* data = nullptr;   // `count` values of header.dtype, kept alive by `owner`
  size_t count = 0;
  size_t bytes() const { return count * element_bytes(header.dtype); }
  Owner owner;
  bool checksum_ready = false;  // set by a transport that computed header.checksum already (send_to_each)
};

// A message whose payload is text padded to whole floats (pad_text), kept alive by `text`.
inline OutMessage text_message(MessageKind kind, uint32_t epoch, uint64_t round, uint32_t tag,
                               std::shared_ptr<const std::string> text) {
  OutMessage m;
  m.header.kind = kind;
  m.header.epoch = epoch;
  m.header.round = round;
  m.header.tag = tag;
  m.header.total_floats = text->size() / sizeof(float);
  m.header.payload_bytes = static_cast<uint32_t>(text->size());
  m.data = text->data();
  m.count = text->size() / sizeof(float);
  m.owner = std::move(text);
  return m;
}

// A received chunk; `owner` keeps `data` alive (it points into the network buffer: no copy).
struct InMessage {
  Header header;
  const float* data = nullptr;  // the payload: `count` values of header.dtype (for bf16 see bf16())
  size_t count = 0;
  size_t bytes() const { return count * element_bytes(header.dtype); }
  const uint16_t* bf16() const { return reinterpret_cast<const uint16_t*>(data); }
  std::shared_ptr<void> owner;
  bool verified = true;  // false: the consumer must check header.checksum before using data
  bool finite = true;    // set by ChunkReader: false when a value is NaN or ±Inf
  double sum_squares = 0;  // set by ChunkReader: Σ value² (from the checksum's pass over the network)
  bool scanned = true;     // false: ChunkReader left the scan to the caller's own pass (settle())
  // Single copy: the values are still in the lender's memory (process `pid`, at `address`) and
  // data is null; the transport's receive() copies them on the consumer's thread, right before
  // they are used, so they come out of that core's cache. Never seen by a receive() caller.
  struct Lent {
    uint64_t pid = 0, address = 0;
    uint64_t fd = 0, inode = 0, offset = 0;  // the lender's shared region holding them (inode 0: none)
    Clock::time_point arrived{};  // one waiting long is copied by the comm thread after all
  };
  std::optional<Lent> lent;
  // True when data points into a region its sender may still write (single copy's shared
  // regions, folded in place): a reader that checks the values and then uses them must read
  // each value once, checking it in the same pass, or call privatize() first.
  bool shared = false;
};

// Gives a shared message a private copy of its values (and drops its hold on the sender's region).
void privatize(InMessage& m);

struct MatchKey {
  MessageKind kind;
  int sender;
  uint64_t round;
  uint32_t tag = 0;
  uint32_t epoch = 0;  // membership epoch the sender was in
  bool operator<(const MatchKey& o) const {
    return std::tie(kind, sender, round, tag, epoch) < std::tie(o.kind, o.sender, o.round, o.tag, o.epoch);
  }
};

// Thrown by Transport::receive on the training thread when the membership is changing (a member
// fell silent, asked to join or leave): the caller abandons the round and takes part in the change.
struct MembershipInterrupt : std::exception {
  const char* what() const noexcept override { return "a membership change interrupted a receive"; }
};

// Where a peer is reached: its stable id, endpoint and (with CurveZMQ) public key in Z85.
struct PeerAddress {
  int id = 0;
  std::string endpoint;
  std::string key;
};

struct TransportStats {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t bytes_lent = 0;  // of bytes_sent: values neighbours copied out of this peer's memory (single copy)
  uint64_t bytes_mapped = 0;  // of bytes_received: lent values folded in place from a neighbour's shared region
  uint64_t messages_dropped = 0;
  uint64_t connections_refused = 0;  // closed over the cap on unverified connections
  double wait_seconds = 0;  // time the training thread spent blocked in receive()
  uint64_t heartbeats_sent = 0;  // failure-detector messages (elastic membership)
  uint64_t view_messages_sent = 0, view_bytes_sent = 0;  // view-change proposals and decisions (with headers)
  double seconds_up = 0;         // since the transport started
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Queues a message to `peer` and returns at once; the transport stamps the header's sender,
  // epoch and checksum.
  virtual void send(int peer, OutMessage message) = 0;
  // The same message to each of `peers` (a transport that checksums does it once for all).
  virtual void send_to_each(const std::vector<int>& peers, const OutMessage& message) {
    for (int p : peers) send(p, message);
  }
  // Next chunk matching `key`, in arrival order; nullopt once `deadline` passes. Rethrows an
  // error stored by the communication thread; throws MembershipInterrupt when a membership
  // change is pending (elastic transports only).
  [[nodiscard]] virtual std::optional<InMessage> receive(const MatchKey& key, Clock::time_point deadline) = 0;
  // True when a chunk matching `key` is already here (never blocks).
  [[nodiscard]] virtual bool ready(const MatchKey& key) = 0;
  // The endpoint a peer can be reached at (resolved through the rendezvous when it bound port 0).
  virtual std::string endpoint_of(int peer) const = 0;
  // Where `peer` is or was reached, for messages: endpoint_of, or, where that no longer resolves
  // (a peer bound to port 0 whose rendezvous file went with it), where it was last dialled.
  virtual std::string last_known_endpoint(int peer) const { return endpoint_of(peer); }
  // Description of a peer for error messages: "peer 3 (tcp://127.0.0.1:40123)".
  std::string describe(int peer) const { return "peer " + std::to_string(peer) + " (" + last_known_endpoint(peer) + ")"; }
  virtual TransportStats stats() const = 0;
  // The membership epoch stamped on every message sent (0 for a fixed set of peers).
  virtual uint32_t epoch() const { return 0; }
  // What was dropped here of what `peer` sent (malformed, another protocol or model shape, a
  // checksum setting this peer refuses): "" when nothing, else how many and why the last was. The
  // error a neighbour's missing message ends in names it (see no_message_from in collectives.h).
  virtual std::string dropped_from(int peer) const {
    (void)peer;
    return "";
  }
};

}  // namespace gossip::peer
