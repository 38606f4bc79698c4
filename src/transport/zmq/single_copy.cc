// Single-copy transfers of ZmqTransport (see LentRef in wire_format.h): a vector chunk is lent
// (a reference goes over the socket), the neighbour copies the values out of this process's
// memory with process_vm_readv — or, for a chunk in a shared region (common/shared_memory.h),
// maps the region and folds the values where they are — and says so; a refusal sends the values
// over the socket instead.
#include "transport/zmq/zmq_transport.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/zmq/frames.h"
#include "transport/zmq/link.h"

namespace gossip::peer {
namespace {

// Copies `bytes` from `address` in process `pid` into `dst`; an error text, or nullopt.
std::optional<std::string> read_process_memory(uint64_t pid, uint64_t address, void* dst, size_t bytes) {
  iovec local{dst, bytes};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address)), bytes};
  const ssize_t got = ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(bytes)) return std::nullopt;
  if (got < 0) return std::string("process_vm_readv: ") + std::strerror(errno);
  return "process_vm_readv copied " + std::to_string(got) + " of " + std::to_string(bytes) + " bytes";
}

// Logged once per lender, when the first of its chunks is refused.
void log_unreadable(int rank, int lender, const std::string& problem) {
  log("peer ", rank, ": cannot copy peer ", lender, "'s values out of its memory (", problem,
      "): they come over the socket from now on");
}

}  // namespace

// Sends a reference to m's values instead of the values, and keeps m (its owner holds the buffer)
// until the neighbour says it copied them. m's own header stays as it was, for a resend.
bool ZmqTransport::send_lent(Link& link, OutMessage& m) {
  Header h = m.header;
  h.flags = kFlagLent;
  LentRef ref;
  ref.pid = static_cast<uint64_t>(::getpid());
  ref.address = reinterpret_cast<uintptr_t>(m.data);
  ref.token = link.next_token;
  ref.cookie_address = reinterpret_cast<uintptr_t>(&cookie_);
  ref.cookie = cookie_;
  if (const auto place = shm::locate(m.data, m.header.payload_bytes)) {  // the reader may fold it in place
    ref.fd = static_cast<uint64_t>(place->fd);
    ref.inode = place->inode;
    ref.offset = place->offset;
  }
  uint8_t frame[kLentRefBytes];
  encode_lent_ref(ref, frame);
  if (!send_frames(*link.dealer, h, frame, kLentRefBytes)) return false;
  bytes_sent_ += kHeaderBytes + h.payload_bytes;  // the values do move (the reader copies them)
  link.lent.emplace(link.next_token++, std::move(m));
  return true;
}

// Whether a chunk lent by `sender` may be copied out of its memory (comm thread): single copy on
// here, the lender not refused before, and its pid checked once to name the lender (the cookie).
// A refusal is logged once; the lender then sends the values over the socket from now on.
bool ZmqTransport::lendable(int sender, const LentRef& ref) {
  if (unreadable_[sender]) return false;
  std::optional<std::string> problem;
  if (!options_.single_copy) {
    problem = "single_copy is off on this peer";
  } else {
    auto known = readable_.find(sender);
    if (known == readable_.end() || known->second != std::make_pair(ref.pid, ref.cookie)) {
      uint64_t cookie = 0;
      problem = read_process_memory(ref.pid, ref.cookie_address, &cookie, sizeof(cookie));
      if (!problem && cookie != ref.cookie)
        problem = "pid " + std::to_string(ref.pid) + " here is another process: another host or pid namespace";
      if (!problem) readable_[sender] = {ref.pid, ref.cookie};
    }
  }
  if (!problem) return true;
  unreadable_[sender] = true;
  log_unreadable(rank(), sender, *problem);
  return false;
}

// Copies a lent chunk's values out of the lender's memory into a buffer of ours: on the training
// thread in receive(), so the values land in the cache of the core about to fold them; on the
// comm thread (under the mailbox's lock) for one waiting long or in a view change. A chunk in a
// shared region of the lender is instead mapped, and on the training thread (in_place) left there
// for the consumer to fold: its ticket then goes, answering the lender, once the consumer drops
// the chunk. Dropping the ticket answers the lender: copied, or refused — then this and every
// later chunk of that lender waiting here is refused, and it sends them all again over the
// socket, in order.
bool ZmqTransport::copy_lent(InMessage& m, bool in_place) {
  auto* ticket = static_cast<LentTicket*>(m.owner.get());
  const int lender = ticket->answer.lender;
  if (lent_answers_->refused(lender)) {
    ticket->answer.copied = false;
    return false;  // the caller drops m, and with it the ticket
  }
  const size_t bytes = m.header.payload_bytes;
  std::shared_ptr<const shm::SharedMapping> mapping;
  if (m.lent->inode != 0) mapping = shared_region(lender, *m.lent, bytes);
  if (mapping) {
    struct Hold {  // the ticket (answered when the consumer drops the chunk) and the mapping
      std::shared_ptr<void> ticket;
      std::shared_ptr<const shm::SharedMapping> mapping;
    };
    m.data = reinterpret_cast<const float*>(mapping->data() + m.lent->offset);
    m.owner = std::make_shared<Hold>(Hold{std::move(m.owner), std::move(mapping)});
    m.shared = true;
    m.lent.reset();
    bytes_mapped_ += bytes;
    if (!in_place) privatize(m);  // copied out of the mapping: the ticket goes, "copied"
    return true;
  }
  std::shared_ptr<void> values(std::malloc(std::max<size_t>(bytes, 1)), std::free);
  if (!values)
    throw Error("peer " + std::to_string(rank()), "out of memory for a " + std::to_string(bytes) + "-byte chunk");
  if (auto problem = read_process_memory(m.lent->pid, m.lent->address, values.get(), bytes)) {
    lent_answers_->refuse_from(lender);
    log_unreadable(rank(), lender, *problem);
    ticket->answer.copied = false;
    return false;
  }
  m.data = static_cast<const float*>(values.get());
  m.lent.reset();
  m.owner = std::move(values);  // the ticket goes: "copied"
  return true;
}

// The mapping of the lender's shared region that holds a lent chunk (any thread): the latest few
// of each lender are kept mapped. Null when it cannot be mapped (logged once per lender, whose
// chunks are then copied out of its memory as any other lent chunk).
std::shared_ptr<const shm::SharedMapping> ZmqTransport::shared_region(int lender, const InMessage::Lent& lent,
                                                                      size_t bytes) {
  std::lock_guard<std::mutex> lock(mappings_mutex_);
  if (unmappable_[lender]) return nullptr;
  auto& mapped = mappings_[lender];
  std::shared_ptr<const shm::SharedMapping> found;
  for (const auto& region : mapped)
    if (region->inode() == lent.inode) found = region;
  std::string problem;
  if (!found) {
    found = std::make_shared<const shm::SharedMapping>(lent.pid, lent.fd, lent.inode, &problem);
    if (found->data()) {
      mapped.push_front(found);
      if (mapped.size() > 4) mapped.pop_back();  // the lender freed or rarely lends from it
    }
  }
  if (problem.empty() && !found->covers(lent.offset, bytes))
    problem = "a chunk of " + std::to_string(bytes) + " bytes at " + std::to_string(lent.offset) +
              " past the end of its " + std::to_string(found->size()) + "-byte region";
  if (problem.empty()) return found;
  unmappable_[lender] = true;
  log("peer ", rank(), ": cannot map peer ", lender, "'s shared region (", problem,
      "): its values are copied out of its memory from now on");
  return nullptr;
}

// Lent chunks waiting in the mailbox since `arrived_by` or before are copied here (comm thread):
// those the training thread has not come for within 50 ms, so a lender is never kept waiting for
// its buffer on a busy reader (its send, its shutdown, which waits for its lent chunks, and a
// chunk the reader never asks for complete), and all of them when a view change begins.
void ZmqTransport::copy_waiting_lent(Clock::time_point arrived_by) {
  if (lent_answers_->waiting() == 0) return;
  mailbox_.for_each([&](InMessage& m, bool& keep) {
    if (m.lent && m.lent->arrived <= arrived_by) keep = copy_lent(m, false);
  });
}

// Sends the answers the training thread's copies (and dropped lent chunks) owe (comm thread). A
// refusal also refuses, here, every chunk that lender lends from now on.
void ZmqTransport::send_lent_answers(zmq::socket_t& router) {
  for (LentAnswer& a : lent_answers_->take()) {
    if (!a.copied) unreadable_[a.lender] = true;
    answer_lent(router, zmq::message_t(a.identity.data(), a.identity.size()), a.lender, a.token, a.copied);
  }
}

// Reads the lent-done answers waiting on a link's dealer (those sent back on our connection: see
// answer_lent).
void ZmqTransport::read_lent_done(Link& l, int peer) {
  for (;;) {
    zmq::message_t head;
    if (!l.dealer->recv(head, zmq::recv_flags::dontwait)) return;
    std::vector<zmq::message_t> rest;
    while (l.dealer->get(zmq::sockopt::rcvmore)) {
      rest.emplace_back();
      (void)l.dealer->recv(rest.back(), zmq::recv_flags::none);
    }
    Header h;
    std::optional<std::string> problem;
    if (rest.size() != 1) problem = std::to_string(rest.size() + 1) + " frames (expected header + payload)";
    else problem = validate_message(head.data(), head.size(), rest[0].data(), rest[0].size(), &h);
    if (!problem && h.kind != MessageKind::kLentDone) problem = "a " + kind_name(h.kind) + " message as an answer";
    if (problem) {
      ++dropped_;
      drop_log_.dropped(log_prefix(), "r" + std::to_string(peer), "an answer: " + *problem,
                        Clock::now());
      continue;
    }
    lent_done(l, peer, h);
  }
}

// A neighbour copied (tag 0) or could not copy (tag 1) the chunk we lent it as token h.round.
void ZmqTransport::lent_done(Link& l, int peer, const Header& h) {
  auto it = l.lent.find(h.round);
  if (it == l.lent.end()) {
    // After a refusal every later token was already queued again; anything else is not ours.
    if (!l.lend_refused) {
      ++dropped_;
      log("peer ", rank(), ": dropped a lent-done from peer ", peer, " for token ", h.round, ", never lent");
    }
    return;
  }
  if (h.tag == 0) {
    bytes_lent_ += it->second.bytes();
    l.lent.erase(it);  // releases the buffer
    return;
  }
  // Refused: the reader refuses every later token too (in order), so all from this one on go
  // again over the socket, ahead of anything not sent yet, keeping each vector's chunk order.
  if (!l.lend_refused) log("peer ", rank(), ": peer ", peer, " cannot copy out of this peer's memory: sending it the values");
  l.lend_refused = true;
  std::deque<OutMessage> again;
  for (auto j = it; j != l.lent.end(); j = l.lent.erase(j)) again.push_back(std::move(j->second));
  l.pending.insert(l.pending.begin(), std::make_move_iterator(again.begin()), std::make_move_iterator(again.end()));
}

// Tells a lender that its chunk `token` was copied, or could not be (it then sends the values).
// Through our own dealer to it, like any message (it lingers at shutdown, so an answer written
// just before this peer stops still arrives); back on the connection the reference came on when
// this peer does not know the lender's endpoint yet (a joiner before its welcome is read) or
// `lender` is -1 (a dropped reference: whoever sent it, not the id it claims, gets the answer).
void ZmqTransport::answer_lent(zmq::socket_t& router, const zmq::message_t& identity, int lender, uint64_t token,
                               bool copied) {
  OutMessage m;
  m.header.kind = MessageKind::kLentDone;
  m.header.sender = static_cast<uint32_t>(rank());
  m.header.epoch = epoch_;
  m.header.round = token;
  m.header.tag = copied ? 0 : 1;
  m.data = &kMagic;  // zero values; any valid pointer
  bool known = false;
  if (lender >= 0) {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    known = endpoints_.count(lender) != 0;
  }
  if (lender >= 0 && suspected_[lender]) return;
  // (An endpoint never published, as a rogue could name, would have the connect wait for it.)
  const auto link = links_.find(lender);
  const bool connected = link != links_.end() && link->second.dealer;
  if (known && rank() >= 0 && (connected || !binds_any_port(endpoint_of_id(lender)))) {
    links_[lender].pending.push_back(std::move(m));
    return;
  }
  // ROUTER drops what it cannot route (a lender that went away).
  FrameOptions to_sender;
  to_sender.identity = &identity;
  send_frames(router, m.header, m.data, 0, to_sender);
}

}  // namespace gossip::peer
