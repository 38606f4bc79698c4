// ZmqTransport's comm thread reading its ROUTER: every message is judged (frames, header,
// sender, size, checksum where it is checked here) before it reaches the mailbox; control
// requests and ZAP requests are answered here.
#include "transport/zmq/zmq_transport.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "transport/zmq/frames.h"
#include "transport/zmq/link.h"

namespace gossip::peer {

// Reads every message waiting on the ROUTER: each is judged, then answered (control) or accepted.
void ZmqTransport::receive_all(zmq::socket_t& router) {
  for (;;) {
    zmq::message_t identity;
    if (!router.recv(identity, zmq::recv_flags::dontwait)) return;
    std::vector<zmq::message_t> frames;
    while (router.get(zmq::sockopt::rcvmore)) {
      frames.emplace_back();
      (void)router.recv(frames.back(), zmq::recv_flags::none);
    }
    Header h;
    if (const std::optional<std::string> problem = judge(identity.to_string(), frames, &h)) {
      ++dropped_;
      drop_log_.dropped(log_prefix(), identity.to_string(), *problem, Clock::now());
      drops_by_member_.note(identity.to_string(), *problem);
      // A dropped lent chunk is refused, so that its lender does not wait for it: it sends the
      // values over the socket, to be judged (and dropped) like any other message.
      if (frames.size() == 2 && frames[0].size() == kHeaderBytes && frames[1].size() == kLentRefBytes &&
          (decode_header(static_cast<const uint8_t*>(frames[0].data())).flags & kFlagLent))
        answer_lent(router, identity, -1, decode_lent_ref(static_cast<const uint8_t*>(frames[1].data())).token, false);
    } else if (h.kind == MessageKind::kControlRequest) {
      answer_control(router, identity, h, frames[1]);
    } else {
      accept(router, identity, h, frames);
    }
  }
}

// Why a message from connection `who` is dropped (nullopt: it is not); fills *h.
std::optional<std::string> ZmqTransport::judge(const std::string& who, std::vector<zmq::message_t>& frames,
                                               Header* h) {
  if (frames.size() != 2) return std::to_string(frames.size()) + " frames (expected header + payload)";
  if (auto problem = validate_header(frames[0].data(), frames[0].size(), frames[1].size(), h)) return problem;
  const MessageKind kind = h->kind;
  auto checksum_ok = [&] { return checksum_matches(*h, frames[1].data(), frames[1].size()); };
  if (kind == MessageKind::kControlRequest) {
    if (!checksum_ok()) return "control request with a bad checksum";
    return std::nullopt;
  }
  if (kind == MessageKind::kControlReply) return "a control reply (peers never ask)";
  if (kind == MessageKind::kJoin) {
    if (who.rfind("j", 0) != 0) return "a join request from a member connection";
    if (h->payload_bytes > 4096) return "a join request of " + std::to_string(h->payload_bytes) + " bytes";
    if (!options_.curve_secret.empty()) {
      // The key the joiner claims must be the one it proved it holds (ZAP's user id).
      const char* user = frames[0].gets("User-Id");
      const std::string text(static_cast<const char*>(frames[1].data()), frames[1].size());
      if (!user || text.find(std::string(" ") + user) == std::string::npos)
        return "a join request claiming a key it did not authenticate with";
    }
    return std::nullopt;
  }
  if (h->sender >= (1u << 24) || who != "r" + std::to_string(h->sender))
    return "sender field " + std::to_string(h->sender) + " does not match the connection";
  if (h->total_floats > max_total_floats_)
    return "vector of " + std::to_string(h->total_floats) + " floats (this run's model has at most " +
           std::to_string(max_total_floats_.load()) + "): another model shape?";
  const bool lent = h->flags & kFlagLent;
  if (lent && h->payload_bytes > options_.chunk_bytes)
    return "a lent chunk of " + std::to_string(h->payload_bytes) + " bytes (chunks are at most " +
           std::to_string(options_.chunk_bytes) + ")";
  if (lent && !checksum_ok()) return "a lent chunk reference with a bad checksum";
  if (h->flags & kFlagUnchecked) {  // the header's checksum is checked here, as it costs nothing
    if (options_.checksum_always) return "a vector chunk without a payload checksum (this peer has algorithm.checksum: always)";
    if (!takes_unchecked_)
      return "a vector chunk without a payload checksum over a link that does not keep bytes intact by itself "
             "(this peer takes those over loopback, ipc:// or CurveZMQ only)";
    if (!checksum_ok()) return "a header with a bad checksum";
  }
  if (kind == MessageKind::kLentDone && !checksum_ok()) return "a lent-done with a bad checksum";
  if (kind == MessageKind::kHeartbeat && h->tag != kBeat) {
    if (h->tag > kProbeVouch) return "a heartbeat with an unknown probe tag " + std::to_string(h->tag);
    if (!checksum_ok()) return "a probe with a bad checksum";  // its round and offset name a member and a time
  }
  if (kind == MessageKind::kHeartbeat && h->tag == kBeat && h->round != 0 && !checksum_ok())
    return "a heartbeat with a bad checksum";  // its round is the sender's settings digest
  return std::nullopt;
}

// A valid message: heartbeats and lent-done answers are handled here, a late proposal is
// answered with our decision, anything else goes to the mailbox.
void ZmqTransport::accept(zmq::socket_t& router, const zmq::message_t& identity, const Header& h,
                          std::vector<zmq::message_t>& frames) {
  if (guard_) guard_->verified(frames[0].get(ZMQ_SRCFD));
  const auto kind = h.kind;
  if (kind != MessageKind::kJoin) note_heard(static_cast<int>(h.sender), Clock::now());
  if (kind == MessageKind::kHeartbeat) {
    if (h.tag != kBeat) answer_probe(h, Clock::now());
    else compare_settings(static_cast<int>(h.sender), h.round);
    return;
  }
  if (kind == MessageKind::kLentDone) {
    auto link = links_.find(static_cast<int>(h.sender));
    if (link != links_.end()) lent_done(link->second, link->first, h);  // else gone, and its lent chunks with it
    return;
  }
  // A late proposal of a change that is over (or that this peer ended cut off): neither queued
  // nor allowed to interrupt (an interrupt with nothing to agree on would abandon a collective
  // for nothing).
  if (decision_.answers(h, epoch_)) {
    std::optional<OutMessage> decision = decision_.answer(h);
    bool known;
    {
      std::lock_guard<std::mutex> lock(peers_mutex_);
      known = endpoints_.count(static_cast<int>(h.sender)) != 0;
    }
    if (decision && known) {  // tell the late one what was decided (even that it is gone)
      decision->header.sender = static_cast<uint32_t>(rank());
      links_[static_cast<int>(h.sender)].pending.push_back(std::move(*decision));
    }
    return;
  }
  if (kind == MessageKind::kView) note_view_change(Clock::now(), h.epoch);
  bytes_received_ += kHeaderBytes + h.payload_bytes;

  InMessage in;
  in.header = h;
  in.count = h.payload_bytes / element_bytes(h.dtype);
  // The payload checksum is checked by the consumer (receive_vector); an unchecked payload's
  // header was checked in judge().
  in.verified = (h.flags & kFlagUnchecked) != 0;
  if (h.flags & kFlagLent) {
    const LentRef ref = decode_lent_ref(static_cast<const uint8_t*>(frames[1].data()));
    const int lender = static_cast<int>(h.sender);
    if (!lendable(lender, ref)) {
      answer_lent(router, identity, lender, ref.token, false);
      return;  // it comes again over the socket
    }
    // Copied by receive() on the training thread; the ticket answers the lender however it goes.
    in.header.flags = 0;
    in.lent = InMessage::Lent{ref.pid, ref.address, ref.fd, ref.inode, ref.offset, Clock::now()};
    in.owner = std::make_shared<LentTicket>(lent_answers_, LentAnswer{lender, ref.token, true, identity.to_string()});
    in.verified = true;  // copied by the kernel from the sender's own buffer: no checksum to check
    // While the members change views the training thread may not come for it soon: copy it now.
    if (changing(Clock::now()) && !copy_lent(in, false)) return;  // refused: it comes again over the socket
  } else if (reinterpret_cast<uintptr_t>(frames[1].data()) % alignof(float) == 0) {
    auto payload = std::make_shared<zmq::message_t>(std::move(frames[1]));
    in.data = static_cast<const float*>(payload->data());
    in.owner = payload;
  } else {
    // Small messages may sit unaligned inside ZeroMQ's receive batch: copy those.
    auto copy = std::make_shared<std::vector<float>>((h.payload_bytes + sizeof(float) - 1) / sizeof(float));
    if (h.payload_bytes) std::memcpy(copy->data(), frames[1].data(), h.payload_bytes);
    in.data = copy->data();
    in.owner = copy;
  }
  // A proposal from another member interrupts the training thread wherever it waits (a join
  // request waits for the next step: it may yet be refused).
  mailbox_.put(std::move(in), options_.elastic && kind == MessageKind::kView);
}

void ZmqTransport::answer_control(zmq::socket_t& router, const zmq::message_t& identity, const Header& request,
                                  const zmq::message_t& payload) {
  ControlHandler* handler = control_;
  ControlReply reply;
  if (handler) {
    reply = handler->handle(request.tag, std::string(static_cast<const char*>(payload.data()), payload.size()));
  } else {
    reply.text = "{\"error\": \"peer is starting\"}";
  }
  std::string text = pad_text(reply.text);
  const void* data = reply.floats ? static_cast<const void*>(reply.values->data()) : text.data();
  const size_t bytes = reply.floats ? reply.values->size() * sizeof(float) : text.size();
  Header h;
  h.kind = MessageKind::kControlReply;
  h.sender = static_cast<uint32_t>(rank());
  h.round = request.round;
  h.tag = request.tag;
  h.payload_bytes = static_cast<uint32_t>(bytes);
  h.total_floats = bytes / sizeof(float);
  h.weight = reply.floats ? 1.0 : 0.0;
  // A tool that went away is simply not answered: never block the comm thread on it.
  FrameOptions to_tool;
  to_tool.identity = &identity;
  send_frames(router, h, data, bytes, to_tool);
}

// ZAP (RFC 27): version, request id, domain, address, identity, mechanism, credentials.
void ZmqTransport::answer_zap(zmq::socket_t& zap) {
  std::vector<zmq::message_t> f;
  do {
    f.emplace_back();
    if (!zap.recv(f.back(), zmq::recv_flags::dontwait)) return;
  } while (zap.get(zmq::sockopt::rcvmore));
  if (f.size() < 6) return;
  bool allowed = false;
  std::string user_id;
  std::string why = "mechanism " + f[5].to_string();
  if (f[5].to_string() == "CURVE" && f.size() >= 7 && f[6].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(f[6].data()), 32);
    allowed = std::find(options_.allowed_keys.begin(), options_.allowed_keys.end(), std::string(z85)) !=
              options_.allowed_keys.end();
    why = "key " + std::string(z85) + " is not on the allow-list";
    user_id = z85;
  }
  if (!allowed)
    drop_log_.refused(log_prefix(),
                      "refused a connection from " + escape_for_log(f[3].to_string()) + ": " + why, Clock::now());
  zap.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  zap.send(f[1], zmq::send_flags::sndmore);
  zap.send(zmq::buffer(std::string(allowed ? "200" : "400")), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(std::string(allowed ? "OK" : "not allowed")), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(allowed ? user_id : std::string()), zmq::send_flags::sndmore);  // user id: the key
  zap.send(zmq::str_buffer(""), zmq::send_flags::none);
}

}  // namespace gossip::peer
