// SPDX-License-Identifier: Apache-2.0
#include "transport/grpc_call.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace cohort::cli {
namespace {

constexpr std::size_t kMessageHeader = 5;  // compressed flag, 32-bit length
constexpr std::uint32_t kMaxMessage = 256 * 1024 * 1024;

void Put32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}
std::uint32_t Get32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<std::uint8_t>(bytes[i]);
  return value;
}

// grpc-timeout: at most eight digits and a unit.
std::string GrpcTimeout(GrpcCall::Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::system_clock::now())
                        .count();
  return fmt::format("{}m", std::clamp<std::int64_t>(left, 1, 99'999'999));
}

// gRPC percent-encodes grpc-message.
std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr ==
            text.data() + i + 3) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// gRPC's mapping of HTTP statuses, for an answer without grpc-status.
absl::StatusCode CodeForHttpStatus(int status) {
  switch (status) {
    case 400:
      return absl::StatusCode::kInternal;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kUnimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kUnknown;
  }
}

absl::Status ProtocolError(std::string_view what) {
  return absl::InternalError(fmt::format("the controller broke the gRPC protocol: {}", what));
}

const std::string* Find(const std::vector<std::pair<std::string, std::string>>& fields,
                        std::string_view name) {
  for (const auto& [key, value] : fields) {
    if (key == name) return &value;
  }
  return nullptr;
}

template <typename Number>
bool ParseNumber(const std::string* text, Number& out) {
  return text != nullptr && std::from_chars(text->data(), text->data() + text->size(), out).ptr ==
                                text->data() + text->size();
}

}  // namespace

GrpcCall::GrpcCall(std::string_view message, const Sink& sink) : sink_(sink) {
  body_.reserve(kMessageHeader + message.size());
  body_.push_back(0);  // not compressed
  Put32(body_, static_cast<std::uint32_t>(message.size()));
  body_.append(message);
}

Http2Session::Headers GrpcCall::RequestHeaders(std::string_view method, std::string_view scheme,
                                               std::string_view authority, Deadline deadline,
                                               const Metadata& metadata) {
  Http2Session::Headers headers = {{":method", "POST"},
                                   {":scheme", std::string(scheme)},
                                   {":path", std::string(method)},
                                   {":authority", std::string(authority)},
                                   {"te", "trailers"},
                                   {"content-type", "application/grpc"}};
  if (deadline != Deadline::max()) headers.emplace_back("grpc-timeout", GrpcTimeout(deadline));
  headers.insert(headers.end(), metadata.begin(), metadata.end());
  return headers;
}

absl::Status GrpcCall::Status() const {
  if (status_.ok() && !pending_.empty()) return ProtocolError("the answer ended inside a message");
  return status_;
}

void GrpcCall::Finish(absl::Status status) {
  if (finished_) return;
  finished_ = true;
  status_ = std::move(status);
}

absl::Status GrpcCall::OnHeader(Block /*block*/, std::string_view name, std::string_view value) {
  fields_.emplace_back(name, value);
  return absl::OkStatus();
}

absl::Status GrpcCall::OnHeaderBlock(Block block, bool ends_stream) {
  const std::vector<std::pair<std::string, std::string>> fields = std::exchange(fields_, {});
  if (finished_) return absl::OkStatus();
  if (block == Block::kHeaders && !headers_seen_) {
    headers_seen_ = true;
    int http_status = 0;
    if (!ParseNumber(Find(fields, ":status"), http_status)) {
      Finish(ProtocolError("answer headers without a :status"));
      return absl::OkStatus();
    }
    // Anything but 200 is not a gRPC server answering (a proxy, say).
    if (http_status != 200 && Find(fields, "grpc-status") == nullptr) {
      Finish(absl::Status(
          CodeForHttpStatus(http_status),
          fmt::format("the controller's address answered HTTP status {}, not gRPC", http_status)));
      return absl::OkStatus();
    }
    // Without END_STREAM these are the headers, and messages follow; with
    // it, a trailers-only answer (an error, as a rule).
    if (!ends_stream) return absl::OkStatus();
  } else if (!ends_stream) {
    Finish(ProtocolError("a second header block that does not end the stream"));
    return absl::OkStatus();
  }
  int code = 0;
  if (!ParseNumber(Find(fields, "grpc-status"), code) || code < 0 || code > 16) {
    Finish(ProtocolError("trailers without a valid grpc-status"));
    return absl::OkStatus();
  }
  const std::string* message = Find(fields, "grpc-message");
  Finish(code == 0 ? absl::OkStatus()
                   : absl::Status(static_cast<absl::StatusCode>(code),
                                  message == nullptr ? "" : PercentDecode(*message)));
  return absl::OkStatus();
}

absl::Status GrpcCall::OnData(std::string_view data) {
  if (finished_) return absl::OkStatus();
  if (!headers_seen_) {
    Finish(ProtocolError("DATA before the answer's headers"));
    return absl::OkStatus();
  }
  // gRPC's length-prefixed messages, which DATA frames cut anywhere.
  pending_.append(data);
  std::size_t at = 0;
  while (pending_.size() - at >= kMessageHeader) {
    const std::string_view rest = std::string_view(pending_).substr(at);
    const std::uint32_t length = Get32(rest.substr(1));
    if (length > kMaxMessage) {
      return absl::ResourceExhaustedError(
          fmt::format("the controller's answer is {} MiB, more than the {} MiB this client takes; "
                      "ask for less (filter the listing)",
                      length >> 20, kMaxMessage >> 20));
    }
    if (rest.size() - kMessageHeader < length) break;
    if (rest[0] != 0)
      return ProtocolError("a compressed message, which this client did not ask for");
    ++messages_;
    at += kMessageHeader + length;
    if (!sink_(rest.substr(kMessageHeader, length))) {
      abandoned_ = true;
      pending_.clear();
      Finish(absl::CancelledError("the call was ended by its reader"));
      return absl::OkStatus();
    }
  }
  pending_.erase(0, at);
  return absl::OkStatus();
}

void GrpcCall::OnClose(std::uint32_t error_code) {
  if (finished_) return;
  switch (error_code) {
    case NGHTTP2_NO_ERROR:
      Finish(ProtocolError("the answer ended without trailers"));
      return;
    case NGHTTP2_REFUSED_STREAM:
      refused_ = !headers_seen_;
      Finish(absl::UnavailableError("the controller refused the call"));
      return;
    case NGHTTP2_CANCEL:
      Finish(absl::CancelledError("the controller cancelled the call"));
      return;
    case NGHTTP2_ENHANCE_YOUR_CALM:
      Finish(absl::ResourceExhaustedError("the controller is shedding load"));
      return;
    default:
      Finish(absl::InternalError(
          fmt::format("the controller reset the call (HTTP/2 error code {})", error_code)));
      return;
  }
}

}  // namespace cohort::cli
