#include "transport/inproc/inproc_transport.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace gossip::peer {
namespace {

// The slot of an "inproc://<slot>" endpoint, or -1.
int slot_of_endpoint(const std::string& endpoint) {
  const std::string prefix = "inproc://";
  if (endpoint.rfind(prefix, 0) != 0 || endpoint.size() == prefix.size()) return -1;
  int slot = 0;
  for (size_t i = prefix.size(); i < endpoint.size(); ++i) {
    if (endpoint[i] < '0' || endpoint[i] > '9' || slot > 1000000) return -1;
    slot = slot * 10 + (endpoint[i] - '0');
  }
  return slot;
}

}  // namespace

InprocFabric::InprocFabric(int n)
    : transports_(n, nullptr),
      reachable_(std::make_unique<std::atomic<bool>[]>(n)),
      triggers_(n),
      side_(std::make_unique<std::atomic<int>[]>(n)) {
  for (int i = 0; i < n; ++i) {
    boxes_.push_back(std::make_unique<Mailbox>());
    reachable_[i] = true;
    side_[i] = 0;
  }
}

void InprocFabric::set_side(int slot, int side) {
  if (slot < 0 || slot >= size()) throw Error("inproc transport", "no slot " + std::to_string(slot));
  side_[slot] = side;
}

void InprocFabric::set_link(const LinkModel& model) {
  // Not locked: called before any peer sends (a wire stopping here could be delivering under mutex_).
  wire_.reset();
  if (model.active()) wire_ = std::make_unique<InprocWire>(model, [this](int slot, InMessage m) { arrive(slot, std::move(m)); });
}

uint64_t InprocFabric::lost() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return wire_ ? wire_->lost() : 0;
}

void InprocFabric::attach(int slot, InprocTransport* t) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (slot < 0 || slot >= size()) throw Error("inproc transport", "no slot " + std::to_string(slot));
  transports_[slot] = t;
}

void InprocFabric::detach(int slot) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  transports_[slot] = nullptr;
}

void InprocFabric::set_reachable(int slot, bool reachable) {
  if (slot < 0 || slot >= size()) throw Error("inproc transport", "no slot " + std::to_string(slot));
  reachable_[slot] = reachable;
}

bool InprocFabric::reachable(int slot) const {
  if (slot < 0 || slot >= size()) throw Error("inproc transport", "no slot " + std::to_string(slot));
  return reachable_[slot];
}

void InprocFabric::crash_after_sending(int slot, MessageKind kind, int count) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  triggers_.at(slot) = {kind, count};
  ++armed_;
}

void InprocFabric::count_sent(int slot, MessageKind kind) {
  if (armed_ == 0) return;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    CrashTrigger& t = triggers_.at(slot);
    if (t.left <= 0 || t.kind != kind || --t.left > 0) return;
  }
  crash(slot);
}

void InprocFabric::crash(int slot) {
  set_reachable(slot, false);
  box(slot).fail(std::make_exception_ptr(Error("inproc transport", "slot " + std::to_string(slot) + " crashed")));
  std::vector<InprocTransport*> others;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    for (int s = 0; s < size(); ++s)
      if (s != slot && reachable_[s] && transports_[s]) others.push_back(transports_[s]);
  }
  for (InprocTransport* t : others) {
    int id = -1;
    if (t->has_member_at(slot, &id)) t->suspect(id);
  }
}

InprocTransport::InprocTransport(InprocFabric& fabric, int slot, int id) : fabric_(&fabric), slot_(slot), self_id_(id) {
  for (int i = 0; i < fabric.size(); ++i) {
    endpoints_[i] = "inproc://" + std::to_string(i);
    members_.push_back(i);
  }
  fabric.attach(slot, this);
}

InprocTransport::~InprocTransport() { fabric_->detach(slot_); }

int InprocTransport::slot_of(int id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = endpoints_.find(id);
  return it == endpoints_.end() ? -1 : slot_of_endpoint(it->second);
}

bool InprocTransport::has_member_at(int slot, int* id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int m : members_) {
    auto it = endpoints_.find(m);
    if (m != self_id_ && it != endpoints_.end() && slot_of_endpoint(it->second) == slot) {
      *id = m;
      return true;
    }
  }
  return false;
}

bool InprocTransport::accepts_endpoint(const std::string& endpoint) const {
  const int slot = slot_of_endpoint(endpoint);
  return slot >= 0 && slot < fabric_->size();
}

std::string InprocTransport::endpoint_of(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = endpoints_.find(peer);
  return it == endpoints_.end() ? "?" : it->second;
}

void InprocTransport::send(int peer, OutMessage m) {
  const int slot = slot_of(peer);
  if (slot < 0 || slot >= fabric_->size()) throw Error("inproc transport", "no peer " + std::to_string(peer));
  m.header.sender = static_cast<uint32_t>(self_id_.load());
  m.header.payload_bytes = static_cast<uint32_t>(m.bytes());
  // The fake copies: a receiver may hold a chunk after its sender has failed and freed the
  // buffer, which real sends never allow (the ZeroMQ transport has the bytes out first).
  auto copy = std::make_shared<std::vector<float>>((m.bytes() + sizeof(float) - 1) / sizeof(float));
  if (m.count) std::memcpy(copy->data(), m.data, m.bytes());
  InMessage in;
  in.header = m.header;
  in.data = copy->data();
  in.count = m.count;
  in.owner = copy;
  sent_ += m.bytes();
  if (m.header.kind == MessageKind::kView) {
    ++view_messages_;
    view_bytes_ += kHeaderBytes + m.bytes();
  }
  deliver(slot, std::move(in));
}

void InprocTransport::send_join(const std::string& contact, const std::string&, const std::string& text, uint64_t) {
  const int slot = slot_of_endpoint(contact);
  if (slot < 0 || slot >= fabric_->size()) throw Error("inproc transport", "no peer at " + contact);
  auto padded = std::make_shared<std::string>(pad_text(text));
  const OutMessage m = text_message(MessageKind::kJoin, 0, 0, 0, padded);
  InMessage in;
  in.header = m.header;
  in.data = reinterpret_cast<const float*>(padded->data());
  in.count = m.count;
  in.owner = padded;
  deliver(slot, std::move(in));
}

void InprocTransport::deliver(int slot, InMessage message) {
  // A peer that crashed or is cut off sends nothing and is sent nothing.
  if (!fabric_->reachable(slot_) || !fabric_->reachable(slot)) return;
  const MessageKind kind = message.header.kind;
  fabric_->deliver(slot_, slot, std::move(message));
  fabric_->count_sent(slot_, kind);
}

void InprocFabric::deliver(int from_slot, int slot, InMessage message) {
  if (side_[from_slot] != side_[slot]) return;  // across a partition
  // (wire_ is set before any peer sends: read without the lock)
  if (wire_) wire_->send(from_slot, slot, std::move(message));
  else arrive(slot, std::move(message));
}

void InprocFabric::arrive(int slot, InMessage message) {
  if (!reachable_[slot]) return;  // crashed while the message was on the way
  // Held while the receiver handles it, so that it cannot be destroyed meanwhile (recursive: an
  // answer to a late proposal is delivered from inside).
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (transports_.at(slot)) transports_[slot]->arrive(std::move(message));
  else box(slot).put(std::move(message));  // not started yet: it waits, as on a socket
}

void InprocTransport::arrive(InMessage m) {
  const Header& h = m.header;
  if (decision_.answers(h, epoch_)) {
    // A late proposal of a change that is over (or that this peer ended cut off): answered, never queued.
    std::optional<OutMessage> decision = decision_.answer(h);
    if (decision && slot_of(static_cast<int>(h.sender)) >= 0) send(static_cast<int>(h.sender), std::move(*decision));
    return;
  }
  received_ += m.bytes();
  const bool proposal = h.kind == MessageKind::kView;
  box().put(std::move(m), proposal);
}

std::optional<InMessage> InprocTransport::receive(const MatchKey& key, Clock::time_point deadline) {
  return box().take(key, deadline);
}

void InprocTransport::set_members(const std::vector<PeerAddress>& members, uint32_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  members_.clear();
  for (const PeerAddress& m : members) {
    endpoints_[m.id] = m.endpoint;
    members_.push_back(m.id);
  }
  epoch_ = epoch;
}

void InprocTransport::add_endpoint(int id, const std::string& endpoint, const std::string&) {
  std::lock_guard<std::mutex> lock(mutex_);
  endpoints_[id] = endpoint;
}

void InprocTransport::suspect(int id) {
  InMessage note;
  note.header.kind = MessageKind::kSuspect;
  note.header.sender = static_cast<uint32_t>(id);
  box().put(std::move(note), /*interrupt=*/true);
}

TransportStats InprocTransport::stats() const {
  TransportStats s;
  s.bytes_sent = sent_;
  s.bytes_received = received_;
  s.view_messages_sent = view_messages_;
  s.view_bytes_sent = view_bytes_;
  return s;
}

}  // namespace gossip::peer
