// The tool side of the control channel against a stand-in peer (a ROUTER on 127.0.0.1 that
// answers each request as the test says): a well-formed answer is read, an answer holding bytes
// that are not printable text is refused naming the byte and where it is, silence is a timeout
// naming the endpoint.
#include "control/control_client.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "common/error.h"
#include "transport/zmq/frames.h"

namespace gossip::peer {
namespace {

// Answers the first request that arrives with `text` as a control reply (nothing when `text` is
// empty), on its own thread; joined by the destructor.
class StandInPeer {
 public:
  explicit StandInPeer(zmq::context_t& context, std::string text)
      : router_(context, zmq::socket_type::router), text_(pad_text(std::move(text))) {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { answer_one(); });
  }
  ~StandInPeer() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void answer_one() {
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) == 0) return;
    std::vector<zmq::message_t> frames;
    do {
      frames.emplace_back();
      (void)router_.recv(frames.back(), zmq::recv_flags::none);
    } while (router_.get(zmq::sockopt::rcvmore));
    Header request;
    if (frames.size() != 3 || validate_message(frames[1].data(), frames[1].size(), frames[2].data(),
                                               frames[2].size(), &request))
      return;
    if (text_.empty()) return;
    Header h;
    h.kind = MessageKind::kControlReply;
    h.sender = 0;
    h.round = request.round;
    h.payload_bytes = static_cast<uint32_t>(text_.size());
    h.total_floats = text_.size() / sizeof(float);
    FrameOptions options;
    options.identity = &frames[0];
    send_frames(router_, h, text_.data(), text_.size(), options);
  }

  zmq::socket_t router_;
  std::string text_;
  std::string endpoint_;
  std::thread thread_;
};

std::string error_of(ControlClient& client, double timeout_s) {
  try {
    client.request(ControlOp::kStatus, "{}", timeout_s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ControlClient, ReadsAPrintableAnswer) {
  zmq::context_t context;
  StandInPeer peer(context, "{\"round\": 7}");
  ControlClient client(context, peer.endpoint());
  const ControlAnswer a = client.request(ControlOp::kStatus, "{}", 5);
  EXPECT_FALSE(a.is_values);
  EXPECT_EQ(a.text.substr(0, 12), "{\"round\": 7}");
}

TEST(ControlClient, RefusesAnAnswerHoldingControlBytes) {
  zmq::context_t context;
  StandInPeer peer(context, "{\"round\": 7}\n[peer 0] final: forged\x1b[2J");
  ControlClient client(context, peer.endpoint());
  const std::string e = error_of(client, 5);
  EXPECT_NE(e.find(peer.endpoint()), std::string::npos) << e;
  EXPECT_NE(e.find("malformed answer: byte 0x0a at offset 12"), std::string::npos) << e;
  EXPECT_EQ(e.find("forged"), std::string::npos) << "the answer's text is not repeated: " << e;
}

TEST(ControlClient, SilenceIsATimeoutNamingThePeer) {
  zmq::context_t context;
  StandInPeer peer(context, "");
  ControlClient client(context, peer.endpoint());
  const std::string e = error_of(client, 0.25);
  EXPECT_NE(e.find(peer.endpoint() + ": no answer within 0.25 s"), std::string::npos) << e;
}

}  // namespace
}  // namespace gossip::peer
