#include "wire/wire_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace gossip::peer {
namespace {

Header sample() {
  Header h;
  h.kind = MessageKind::kPushSum;
  h.sender = 7;
  h.epoch = 3;
  h.round = 0x1122334455667788ull;
  h.tag = 9;
  h.total_floats = 1000;
  h.offset = 10;
  h.weight = 0.125;
  return h;
}

struct Encoded {
  uint8_t header[kHeaderBytes];
  std::vector<float> payload;
};

Encoded encode(Header h, std::vector<float> payload) {
  Encoded e;
  h.payload_bytes = static_cast<uint32_t>(payload.size() * 4);
  h.checksum = message_checksum(h, payload.data(), h.payload_bytes);
  encode_header(h, e.header);
  e.payload = std::move(payload);
  return e;
}

TEST(WireFormat, RoundTripIsLittleEndianFixedWidth) {
  Header h = sample();
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  EXPECT_EQ(buf[0], 'G');
  EXPECT_EQ(buf[1], 'S');
  EXPECT_EQ(buf[2], 'S');
  EXPECT_EQ(buf[3], 'P');
  EXPECT_EQ(buf[16], 0x88);  // round, least significant byte first
  Header d = decode_header(buf);
  EXPECT_EQ(d.round, h.round);
  EXPECT_EQ(d.sender, 7u);
  EXPECT_EQ(d.weight, 0.125);
  EXPECT_EQ(d.offset, 10u);
}

TEST(WireFormat, Crc32cKnownValue) {
  // The standard CRC-32C check value of "123456789".
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(WireFormat, ValidMessagePasses) {
  Encoded e = encode(sample(), {1, 2, 3});
  Header out;
  EXPECT_EQ(validate_message(e.header, kHeaderBytes, e.payload.data(), 12, &out), std::nullopt);
  EXPECT_EQ(out.tag, 9u);
}

struct Corruption {
  const char* name;
  void (*apply)(Encoded&, size_t& header_bytes, size_t& payload_bytes);
  const char* expect;
};

class BadMessage : public ::testing::TestWithParam<Corruption> {};

TEST_P(BadMessage, IsRejectedWithReason) {
  Encoded e = encode(sample(), {1, 2, 3, 4});
  size_t hb = kHeaderBytes, pb = 16;
  GetParam().apply(e, hb, pb);
  Header out;
  auto problem = validate_message(e.header, hb, e.payload.data(), pb, &out);
  ASSERT_TRUE(problem.has_value()) << GetParam().name;
  EXPECT_NE(problem->find(GetParam().expect), std::string::npos) << *problem;
}

INSTANTIATE_TEST_SUITE_P(
    Corruptions, BadMessage,
    ::testing::Values(
        Corruption{"short header", [](Encoded&, size_t& hb, size_t&) { hb = 10; }, "header frame"},
        Corruption{"magic", [](Encoded& e, size_t&, size_t&) { e.header[0] ^= 1; }, "magic"},
        Corruption{"version", [](Encoded& e, size_t&, size_t&) { e.header[4] = 99; }, "protocol version 99"},
        Corruption{"kind", [](Encoded& e, size_t&, size_t&) { e.header[6] = 77; }, "unknown message kind"},
        Corruption{"truncated payload", [](Encoded&, size_t&, size_t& pb) { pb = 12; }, "payload of 12 bytes"},
        Corruption{"payload bit flip", [](Encoded& e, size_t&, size_t&) { e.payload[2] = 5; }, "checksum"},
        Corruption{"header bit flip", [](Encoded& e, size_t&, size_t&) { e.header[20] ^= 4; }, "checksum"},
        Corruption{"huge offset", [](Encoded& e, size_t&, size_t&) {
                     Header h = decode_header(e.header);
                     h.offset = ~0ull - 1;
                     encode_header(h, e.header);
                   }, "outside"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& c : n) if (c == ' ') c = '_';
      return n;
    });

}  // namespace
}  // namespace gossip::peer

namespace gossip::peer {
namespace {

// The fused NaN/Inf test and sum of squares agree with a plain scan for every position and size
// (stripes, blocks and tail).
TEST(WireFormat, ChecksumPassAlsoScansTheFloats) {
  for (size_t n : {0, 1, 5, 6, 7, 64, 1001, 5000}) {
    std::vector<float> v(n);
    double expected = 0;
    for (size_t i = 0; i < n; ++i) {
      v[i] = 0.5f + float(i % 7);
      expected += double(v[i]) * v[i];
    }
    FloatScan scan;
    scan.finite = false;
    const uint32_t clean = payload_checksum(v.data(), n * 4, 3, &scan);
    EXPECT_TRUE(scan.finite) << n;
    EXPECT_NEAR(scan.sum_squares, expected, 1e-5 * expected) << n;
    EXPECT_EQ(clean, payload_checksum(v.data(), n * 4, 3)) << "same checksum with or without the scan";
    for (size_t i = 0; i < n; ++i) {
      const float keep = v[i];
      v[i] = i % 2 ? std::numeric_limits<float>::infinity() : std::nanf("");
      payload_checksum(v.data(), n * 4, 3, &scan);
      EXPECT_FALSE(scan.finite) << "n " << n << " position " << i;
      v[i] = i % 3 ? -std::numeric_limits<float>::infinity() : -std::nanf("");
      payload_checksum(v.data(), n * 4, 3, &scan);
      EXPECT_FALSE(scan.finite) << "negative, n " << n << " position " << i;
      v[i] = keep;
    }
  }
}

TEST(WireFormat, HardwareCrcMatchesTheTable) {
  std::vector<uint8_t> bytes(1237);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t len : {0, 1, 8, 9, 100, 1237}) EXPECT_EQ(crc32c(bytes.data(), len, 5), crc32c_portable(bytes.data(), len, 5));
}

}  // namespace
}  // namespace gossip::peer

namespace gossip::peer {
namespace {

// bf16 payloads: 2 bytes a value, for gossip and push-sum messages only; the type travels in the
// header.
TEST(WireFormat, Bf16PayloadsAreForMixingMessagesOnly) {
  Header h = sample();
  h.kind = MessageKind::kGossip;
  h.dtype = Dtype::kBf16;
  const std::vector<uint16_t> values = {0x3F80, 0x4000, 0x4040};  // 1, 2, 3: three values, 6 bytes
  h.payload_bytes = 6;
  h.checksum = message_checksum(h, values.data(), 6);
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  EXPECT_EQ(decode_header(buf).dtype, h.dtype);
  Header d;
  EXPECT_EQ(validate_message(buf, kHeaderBytes, values.data(), 6, &d), std::nullopt);
  EXPECT_EQ(d.payload_bytes / element_bytes(d.dtype), 3u);

  h.kind = MessageKind::kPushSum;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 6, &d), std::nullopt);
  h.kind = MessageKind::kReduceScatter;  // DiLoCo's bf16 average
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 6, &d), std::nullopt);
  h.kind = MessageKind::kModel;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 6, &d).value_or(""),
            "bf16 values in a model transfer message (only gossip, push-sum and all-reduce messages carry them)");
  h.kind = MessageKind::kGossip;
  h.dtype = static_cast<Dtype>(7);
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 6, &d).value_or(""), "unknown payload type 7");
  h.dtype = Dtype::kBf16;
  h.payload_bytes = 5;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 5, &d).value_or(""), "payload is not a whole number of bf16 values");
  h.total_floats = h.offset + 2;  // three values do not fit
  h.payload_bytes = 6;
  encode_header(h, buf);
  EXPECT_NE(validate_header(buf, kHeaderBytes, 6, &d).value_or("").find("outside a vector"), std::string::npos);
}

// CHOCO's compressed chunks: 4-byte words in gossip messages only (int8 in all-reduces too); the header checks only that
// the chunk starts inside the vector (its span is in the payload, for the decoder to check).
TEST(WireFormat, CompressedPayloadsAreWordsInGossipAndInt8AllReduceMessagesOnly) {
  Header h = sample();
  h.kind = MessageKind::kGossip;
  h.dtype = Dtype::kTopK;
  h.total_floats = 1000;
  h.offset = 990;
  const std::vector<uint32_t> words = {10, 1, 4, 0x3f800000, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};  // more words than the span
  h.payload_bytes = static_cast<uint32_t>(words.size() * 4);
  h.checksum = message_checksum(h, words.data(), h.payload_bytes);
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  Header d;
  EXPECT_EQ(validate_message(buf, kHeaderBytes, words.data(), h.payload_bytes, &d), std::nullopt);
  EXPECT_EQ(dtype_name(d.dtype), "top-k");
  FloatScan scan;
  scan.finite = false;
  EXPECT_TRUE(checksum_matches(d, words.data(), h.payload_bytes, &scan));
  EXPECT_TRUE(scan.finite) << "a compressed payload is screened after decoding, not as floats";
  h.offset = 1001;
  encode_header(h, buf);
  EXPECT_NE(validate_header(buf, kHeaderBytes, h.payload_bytes, &d).value_or("").find("outside a vector"), std::string::npos);
  h.offset = 0;
  for (MessageKind kind : {MessageKind::kPushSum, MessageKind::kAllGather}) {
    h.kind = kind;
    encode_header(h, buf);
    EXPECT_NE(validate_header(buf, kHeaderBytes, h.payload_bytes, &d).value_or("").find("top-k values in a"),
              std::string::npos);
  }
  h.dtype = Dtype::kInt8;  // int8 also travels in all-reduces (DiLoCo's average), nowhere else
  for (MessageKind kind : {MessageKind::kReduceScatter, MessageKind::kAllGather, MessageKind::kGossip}) {
    h.kind = kind;
    encode_header(h, buf);
    EXPECT_EQ(validate_header(buf, kHeaderBytes, h.payload_bytes, &d), std::nullopt) << kind_name(kind);
  }
  h.kind = MessageKind::kPushSum;
  encode_header(h, buf);
  EXPECT_NE(validate_header(buf, kHeaderBytes, h.payload_bytes, &d).value_or("").find("int8 values in a push-sum"),
            std::string::npos);
  h.kind = MessageKind::kGossip;
  h.payload_bytes = 6;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 6, &d).value_or(""), "payload is not a whole number of 4-byte words (int8 chunk)");
}

// A lent payload (single copy): the frame is a 64-byte reference, the header's size is that of
// the values; only vector messages may lend, and unknown flags are refused.
TEST(WireFormat, LentPayloadsAreReferencesInVectorMessagesOnly) {
  LentRef ref;
  ref.pid = 4242;
  ref.address = 0x7f0011223344ull;
  ref.token = 9;
  ref.cookie_address = 0x7f0055667788ull;
  ref.cookie = 0xdeadbeefcafef00dull;
  ref.fd = 17;
  ref.inode = 0x123456789ull;
  ref.offset = 1u << 20;
  uint8_t frame[kLentRefBytes];
  encode_lent_ref(ref, frame);
  const LentRef back = decode_lent_ref(frame);
  EXPECT_EQ(back.pid, ref.pid);
  EXPECT_EQ(back.address, ref.address);
  EXPECT_EQ(back.token, ref.token);
  EXPECT_EQ(back.cookie_address, ref.cookie_address);
  EXPECT_EQ(back.cookie, ref.cookie);
  EXPECT_EQ(back.fd, ref.fd);
  EXPECT_EQ(back.inode, ref.inode);
  EXPECT_EQ(back.offset, ref.offset);

  Header h = sample();
  h.kind = MessageKind::kGossip;
  h.flags = kFlagLent;
  h.payload_bytes = 4000;  // 1000 floats stay with the sender
  h.offset = 0;
  h.checksum = message_checksum(h, frame, kLentRefBytes);
  uint8_t buf[kHeaderBytes];
  encode_header(h, buf);
  EXPECT_EQ(decode_header(buf).flags, kFlagLent);
  Header d;
  EXPECT_EQ(validate_message(buf, kHeaderBytes, frame, kLentRefBytes, &d), std::nullopt);
  EXPECT_EQ(d.payload_bytes, 4000u);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 4000, &d).value_or(""),
            "lent payload reference of 4000 bytes (expected 64)");
  frame[3] ^= 1;  // the reference is covered by the checksum
  EXPECT_EQ(validate_message(buf, kHeaderBytes, frame, kLentRefBytes, &d).value_or(""), "checksum mismatch");
  h.kind = MessageKind::kControlRequest;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, kLentRefBytes, &d).value_or(""),
            "a lent payload in a control request message");
  h.kind = MessageKind::kGossip;
  h.flags = 4;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, kLentRefBytes, &d).value_or(""), "unknown header flags 4");
  h.flags = kFlagLent | kFlagUnchecked;  // a reference always carries its checksum
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, kLentRefBytes, &d).value_or(""),
            "an unchecked payload in a lent gossip message (only vector chunks sent as values may skip the checksum)");
  h.flags = kFlagLent;
  h.total_floats = 999;  // 1000 lent floats do not fit
  encode_header(h, buf);
  EXPECT_NE(validate_header(buf, kHeaderBytes, kLentRefBytes, &d).value_or("").find("outside a vector"), std::string::npos);
  h = sample();
  h.kind = MessageKind::kLentDone;
  h.total_floats = h.offset = 0;
  encode_header(h, buf);
  EXPECT_EQ(validate_header(buf, kHeaderBytes, 0, &d), std::nullopt) << "lent-done is a known wire kind";
}

// An unchecked chunk (kFlagUnchecked: a link that keeps bytes intact) has a checksum of its header
// alone: a changed value goes unnoticed by it, a changed header field does not; the scan still
// reads the values. Only vector chunks may be unchecked.
TEST(WireFormat, AnUncheckedChunksChecksumCoversItsHeaderOnly) {
  std::vector<float> values(1000, 0.5f);
  Header h = sample();
  h.kind = MessageKind::kGossip;
  h.offset = 0;
  h.payload_bytes = 4000;
  h.flags = kFlagUnchecked;
  uint8_t head[kHeaderBytes];
  encode_header(h, head);
  EXPECT_EQ(message_checksum(h, values.data(), 4000), crc32c(head, kHeaderBytes - 4));
  Header checked = h;
  checked.flags = 0;
  EXPECT_NE(message_checksum(h, values.data(), 4000), message_checksum(checked, values.data(), 4000));
  h.checksum = message_checksum(h, values.data(), 4000);
  encode_header(h, head);
  Header d;
  values[123] = 7.0f;  // not covered
  EXPECT_EQ(validate_message(head, kHeaderBytes, values.data(), 4000, &d), std::nullopt);
  EXPECT_EQ(d.flags, kFlagUnchecked);
  values[123] = std::nanf("");
  FloatScan scan;
  EXPECT_TRUE(checksum_matches(d, values.data(), 4000, &scan));
  EXPECT_FALSE(scan.finite) << "the scan reads the values all the same";
  Header moved = h;
  moved.round += 1;  // covered: a header changed on the way is caught
  encode_header(moved, head);
  EXPECT_EQ(validate_message(head, kHeaderBytes, values.data(), 4000, &d).value_or(""), "checksum mismatch");
  for (MessageKind kind : {MessageKind::kView, MessageKind::kControlRequest, MessageKind::kHeartbeat}) {
    Header text = h;
    text.kind = kind;
    encode_header(text, head);
    EXPECT_EQ(validate_header(head, kHeaderBytes, 4000, &d).value_or(""),
              "an unchecked payload in a " + kind_name(kind) +
                  " message (only vector chunks sent as values may skip the checksum)");
  }
}

// The checksum's pass reads bf16 values as bf16: NaN/Inf anywhere is found, and the sum of
// squares is that of the widened values.
TEST(WireFormat, ChecksumPassScansBf16Values) {
  for (size_t n : {1, 5, 13, 2000, 5001}) {
    std::vector<uint16_t> v(n, 0x4000);  // 2.0
    FloatScan scan;
    payload_checksum(v.data(), n * 2, 3, &scan, Dtype::kBf16);
    EXPECT_TRUE(scan.finite) << n;
    EXPECT_NEAR(scan.sum_squares, 4.0 * n, 1e-6 * n) << n;
    for (size_t i = 0; i < n; i += (n > 100 ? 97 : 1)) {
      for (uint16_t bad : {0x7FC0, 0x7F80, 0xFF80, 0x7F81}) {  // NaN, +Inf, −Inf, a signalling NaN
        v[i] = bad;
        payload_checksum(v.data(), n * 2, 3, &scan, Dtype::kBf16);
        EXPECT_FALSE(scan.finite) << "n " << n << " position " << i << " value " << bad;
      }
      v[i] = 0x4000;
    }
    EXPECT_TRUE(payload_scan(v.data(), n * 2, Dtype::kBf16).finite);
  }
}

}  // namespace
}  // namespace gossip::peer
