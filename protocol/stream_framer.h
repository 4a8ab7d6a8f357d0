// Stream framing for TCP: each sealed frame travels as
//   length u32 LE | frame bytes (length of them)
// StreamDeframer reassembles frames from bytes as they arrive, however the
// stream splits them. A length of 0 or above the deframer's maximum puts it
// in a sticky error state: the connection must be closed. It buffers at most
// one partial frame (4 + max_frame_bytes bytes), grown only as bytes actually
// arrive, never from the claimed length.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "protocol/seal.h"

namespace pollen::protocol {

inline constexpr size_t kStreamLengthPrefixBytes = 4;

// The length prefix of a sealed frame of `sealed_bytes` bytes, to be sent
// before it (a gather write needs no framed copy).
// 1 <= sealed_bytes <= kMaxFrameBytes.
std::array<char, kStreamLengthPrefixBytes> StreamLengthPrefix(size_t sealed_bytes);
// Prefixes `sealed` with its length. 1 <= sealed.size() <= kMaxFrameBytes.
std::string FrameForStream(std::string_view sealed);

class StreamDeframer {
 public:
  explicit StreamDeframer(size_t max_frame_bytes = kMaxFrameBytes);

  // Consumes all of `bytes` and appends every frame they complete to *frames
  // (in stream order). On a bad length prefix returns InvalidArgument
  // ("ERR stream frame length ..."), and so does every later call: the
  // stream cannot be resynchronized. Frames completed before the bad prefix
  // in the same call are still appended.
  absl::Status Feed(std::string_view bytes, std::vector<std::string>* frames);

  bool failed() const { return !error_.ok(); }
  // Bytes held for the frame in progress (prefix and body).
  size_t buffered_bytes() const { return header_filled_ + body_.size(); }

 private:
  size_t max_frame_bytes_;
  uint8_t header_[kStreamLengthPrefixBytes] = {};
  size_t header_filled_ = 0;
  size_t body_len_ = 0;  // valid once header_filled_ == 4
  std::string body_;
  absl::Status error_;
};

}  // namespace pollen::protocol
