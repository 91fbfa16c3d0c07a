// SPDX-License-Identifier: Apache-2.0
#include "grpc_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace cohort::cli {
namespace {

using Clock = std::chrono::system_clock;

// RFC 9113 §6: frame types, flags, settings and error codes this client uses.
enum FrameType : std::uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoAway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};
constexpr std::uint8_t kEndStream = 0x1;  // DATA, HEADERS
constexpr std::uint8_t kAck = 0x1;        // SETTINGS, PING
constexpr std::uint8_t kEndHeaders = 0x4;
constexpr std::uint8_t kPadded = 0x8;
constexpr std::uint8_t kPriority = 0x20;
constexpr std::uint16_t kSettingEnablePush = 0x2;
constexpr std::uint16_t kSettingInitialWindowSize = 0x4;
constexpr std::uint16_t kSettingMaxFrameSize = 0x5;
constexpr std::uint32_t kRefusedStream = 0x7;
constexpr std::uint32_t kCancel = 0x8;
constexpr std::uint32_t kEnhanceYourCalm = 0xb;

constexpr std::size_t kFrameHeader = 9;
constexpr std::uint32_t kDefaultWindow = 65535;
constexpr std::uint32_t kDefaultMaxFrame = 16384;
// This side's receive windows: the largest allowed, so that the server never
// waits on the client while it sends a large listing.
constexpr std::uint32_t kMaxWindow = 0x7fffffff;
// Received bytes are handed back once this many have arrived.
constexpr std::int64_t kWindowRefill = std::int64_t{1} << 30;
constexpr std::size_t kGrpcMessageHeader = 5;  // compressed flag, 32-bit length
constexpr std::size_t kReadChunk = 256 * 1024;
// Bounds on what the server may make this client hold: a header block (a
// HEADERS frame and its CONTINUATIONs) and one gRPC message. Past them the
// call fails with a clear error instead of growing without end.
constexpr std::size_t kMaxHeaderBlock = 256 * 1024;
constexpr std::uint32_t kMaxResponseMessage = 256 * 1024 * 1024;
constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

void Put32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}
std::uint32_t Get32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<std::uint8_t>(bytes[i]);
  return value;
}

void AppendFrame(std::string& out, FrameType type, std::uint8_t flags, std::uint32_t stream,
                 std::string_view payload) {
  const auto length = static_cast<std::uint32_t>(payload.size());
  out.push_back(static_cast<char>(length >> 16));
  out.push_back(static_cast<char>(length >> 8));
  out.push_back(static_cast<char>(length));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  Put32(out, stream);
  out.append(payload);
}

std::string WindowUpdate(std::uint32_t stream, std::uint32_t increment) {
  std::string payload;
  Put32(payload, increment);
  std::string frame;
  AppendFrame(frame, kWindowUpdate, 0, stream, payload);
  return frame;
}

// grpc-timeout (gRPC's PROTOCOL-HTTP2): at most eight digits and a unit.
std::string GrpcTimeout(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
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

// gRPC's mapping of HTTP statuses, for a response without grpc-status.
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

const std::string* Find(const std::vector<hpack::Field>& fields, std::string_view name) {
  for (const hpack::Field& field : fields) {
    if (field.name == name) return &field.value;
  }
  return nullptr;
}

absl::Status ProtocolError(std::string_view what) {
  return absl::InternalError(fmt::format("the controller broke the HTTP/2 protocol: {}", what));
}

}  // namespace

CallCanceller::CallCanceller() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

CallCanceller::~CallCanceller() {
  if (fd_ >= 0) ::close(fd_);
}

void CallCanceller::Cancel() {
  cancelled_.store(true);
  if (fd_ < 0) return;  // no eventfd: the call sees the flag before it next waits
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof(one));
}

// One call: what was sent and what has come back.
struct GrpcChannel::Exchange {
  std::uint32_t stream = 0;
  Deadline deadline;
  std::string data;  ///< the framed request message
  std::size_t data_sent = 0;
  std::int64_t send_window = 0;  ///< what the server still accepts on this stream
  std::int64_t received = 0;     ///< DATA bytes since this stream's window was refilled

  std::string header_block;  ///< a HEADERS frame and its CONTINUATIONs so far
  bool in_header_block = false;
  bool block_ends_stream = false;
  bool headers_seen = false;
  int http_status = 0;
  std::string pending;  ///< DATA received that is not a whole message yet
  const MessageSink* sink = nullptr;
  std::size_t messages = 0;  ///< handed to `sink`

  bool finished = false;
  bool retry = false;  ///< the server never began this call
  bool drop_connection = false;
  absl::Status status;
};

std::unique_ptr<GrpcChannel> GrpcChannel::ForTarget(std::string_view target, const Tls& tls) {
  std::unique_ptr<GrpcChannel> channel = ForTargetPlain(target);
  if (channel != nullptr && !channel->endpoints_.empty() &&
      channel->endpoints_.front().address.ss_family == AF_UNIX) {
    return channel;  // the local socket is plain: its peer credentials are its security
  }
  if (channel != nullptr) {
    channel->tls_ = tls;
    std::string host(target.substr(0, target.rfind(':')));
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    channel->tls_host_ = std::move(host);
  }
  return channel;
}

std::unique_ptr<GrpcChannel> GrpcChannel::ForTargetPlain(std::string_view target) {
  sockaddr_storage address{};
  if (target.starts_with("unix:")) {
    std::string_view path = target.substr(5);
    if (path.starts_with("//")) path.remove_prefix(2);  // unix:///abs/path
    auto* unix_address = reinterpret_cast<sockaddr_un*>(&address);
    if (path.empty() || path.size() >= sizeof(unix_address->sun_path)) return nullptr;
    unix_address->sun_family = AF_UNIX;
    std::memcpy(unix_address->sun_path, path.data(), path.size());
    return std::unique_ptr<GrpcChannel>(new GrpcChannel(
        "localhost",
        {{address, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1)}}, "",
        0));
  }
  const std::size_t colon = target.rfind(':');
  if (colon == std::string_view::npos) return nullptr;
  std::string host(target.substr(0, colon));
  const std::string_view port_text = target.substr(colon + 1);
  std::uint16_t port = 0;
  if (std::from_chars(port_text.data(), port_text.data() + port_text.size(), port).ptr !=
          port_text.data() + port_text.size() ||
      port == 0) {
    return nullptr;
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    auto* ip6 = reinterpret_cast<sockaddr_in6*>(&address);
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &ip6->sin6_addr) != 1) {
      return nullptr;
    }
    ip6->sin6_family = AF_INET6;
    ip6->sin6_port = htons(port);
    return std::unique_ptr<GrpcChannel>(
        new GrpcChannel(std::string(target), {{address, sizeof(sockaddr_in6)}}, "", 0));
  }
  auto* ip4 = reinterpret_cast<sockaddr_in*>(&address);
  if (::inet_pton(AF_INET, host.c_str(), &ip4->sin_addr) == 1) {
    ip4->sin_family = AF_INET;
    ip4->sin_port = htons(port);
    return std::unique_ptr<GrpcChannel>(
        new GrpcChannel(std::string(target), {{address, sizeof(sockaddr_in)}}, "", 0));
  }
  // A host name: letters, digits, dots, dashes (RFC 1123) and underscores.
  const bool name = !host.empty() && std::ranges::all_of(host, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
  });
  if (!name) return nullptr;
  return std::unique_ptr<GrpcChannel>(new GrpcChannel(std::string(target), {}, host, port));
}

GrpcChannel::GrpcChannel(std::string authority, std::vector<Endpoint> endpoints, std::string host,
                         std::uint16_t port)
    : authority_(std::move(authority)),
      endpoints_(std::move(endpoints)),
      host_(std::move(host)),
      port_(port) {}

GrpcChannel::~GrpcChannel() { Close(); }

std::string GrpcChannel::Describe() const {
  if (!endpoints_.empty() && endpoints_.front().address.ss_family == AF_UNIX) {
    return fmt::format("unix:{}",
                       reinterpret_cast<const sockaddr_un*>(&endpoints_.front().address)->sun_path);
  }
  return authority_;
}

absl::Status GrpcChannel::Wait(short events, Deadline deadline) const {
  for (;;) {
    if (canceller_ != nullptr && canceller_->Cancelled()) {
      return absl::CancelledError("the call was cancelled");
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return absl::DeadlineExceededError("the controller did not answer in time");
    pollfd polled[2] = {
        {.fd = fd_, .events = events, .revents = 0},
        {.fd = canceller_ != nullptr ? canceller_->Fd() : -1, .events = POLLIN, .revents = 0}};
    const int ready = ::poll(polled, 2, static_cast<int>(std::min<std::int64_t>(left, 60'000)));
    if (polled[1].revents != 0) return absl::CancelledError("the call was cancelled");
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::UnavailableError(fmt::format("poll: {}", std::strerror(errno)));
    }
  }
}

void GrpcChannel::Close() {
  session_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  greeting_.clear();
  input_.clear();
  input_start_ = 0;
  frame_payload_ = {};
}

absl::Status GrpcChannel::Connect(const Endpoint& endpoint, Deadline deadline) {
  fd_ = ::socket(endpoint.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return absl::UnavailableError(fmt::format("socket: {}", std::strerror(errno)));
  const auto* address = reinterpret_cast<const sockaddr*>(&endpoint.address);
  const auto failed = [&](int error) {
    return absl::UnavailableError(
        fmt::format("connect to {}: {}", Describe(), std::strerror(error)));
  };
  while (::connect(fd_, address, endpoint.length) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      // A Unix socket whose backlog is full: the controller is behind on
      // accepting. Try again until the deadline.
      if (Clock::now() >= deadline) {
        return absl::DeadlineExceededError("the controller did not accept the connection in time");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (errno != EINPROGRESS) return failed(errno);
    // TCP: the handshake goes on; its outcome is the socket's error.
    if (absl::Status ready = Wait(POLLOUT, deadline); !ready.ok()) return ready;
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return failed(error);
    break;
  }
  return absl::OkStatus();
}

absl::Status GrpcChannel::Open(Deadline deadline) {
  std::vector<Endpoint> resolved;
  if (endpoints_.empty()) {
    absl::StatusOr<std::vector<Endpoint>> found = ResolveHost(host_, port_, deadline);
    if (!found.ok()) return found.status();
    resolved = *std::move(found);
  }
  // Each address in turn, as gRPC's pick_first does; the first error is
  // the one to tell (the others are usually alike, or less to the point).
  const std::vector<Endpoint>& endpoints = endpoints_.empty() ? resolved : endpoints_;
  absl::Status first_error;
  const Endpoint* reached = nullptr;
  for (const Endpoint& endpoint : endpoints) {
    absl::Status connected = Connect(endpoint, deadline);
    if (connected.ok()) {
      reached = &endpoint;
      break;
    }
    Close();
    if (first_error.ok()) first_error = std::move(connected);
    if (absl::IsDeadlineExceeded(first_error) || absl::IsCancelled(first_error)) break;
  }
  if (reached == nullptr) return first_error;
  if (reached->address.ss_family != AF_UNIX) {
    const int on = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    if (tls_.on) {
      if (absl::Status secured = StartTls(deadline); !secured.ok()) {
        Close();
        return secured;
      }
    }
  }
  next_stream_ = 1;
  decoder_ = hpack::Decoder();
  connection_window_ = kDefaultWindow;
  initial_stream_window_ = kDefaultWindow;
  max_frame_size_ = kDefaultMaxFrame;
  connection_received_ = 0;
  going_away_ = false;

  // The preface, this side's settings (no server push; the largest stream
  // window) and the largest connection window.
  std::string hello(kPreface);
  std::string settings;
  for (const auto& [id, value] : {std::pair{kSettingEnablePush, std::uint32_t{0}},
                                  std::pair{kSettingInitialWindowSize, kMaxWindow}}) {
    settings.push_back(static_cast<char>(id >> 8));
    settings.push_back(static_cast<char>(id));
    Put32(settings, value);
  }
  AppendFrame(hello, kSettings, 0, 0, settings);
  hello += WindowUpdate(0, kMaxWindow - kDefaultWindow);
  // Sent with the first call's frames (Run): one write, one wakeup of the
  // server instead of three.
  greeting_ = std::move(hello);
  return absl::OkStatus();
}

absl::Status GrpcChannel::StartTls(Deadline deadline) {
  absl::StatusOr<std::unique_ptr<TlsSession>> session =
      TlsSession::Start(fd_, tls_.ca_file, tls_host_);
  if (!session.ok()) return session.status();
  session_ = *std::move(session);
  for (;;) {
    const Step step = session_->Handshake();
    if (step.bytes > 0) return absl::OkStatus();
    if (step.wait == 0) {
      return absl::UnavailableError(fmt::format(
          "TLS with {} failed: {}", Describe(),
          step.error.empty() ? std::string("the controller closed the connection; does it serve "
                                           "TLS (TLSCertFile)?")
                             : step.error));
    }
    if (absl::Status ready = Wait(step.wait, deadline); !ready.ok()) return ready;
  }
}

GrpcChannel::Step GrpcChannel::WriteSome(std::string_view bytes) {
  if (session_ != nullptr) return session_->Write(bytes);
  Step step;
  for (;;) {
    step.bytes = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (step.bytes >= 0 || errno != EINTR) break;
  }
  if (step.bytes < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    step.wait = POLLOUT;
  } else if (step.bytes < 0) {
    step.error = std::strerror(errno);
  }
  return step;
}

GrpcChannel::Step GrpcChannel::ReadSome(char* into, std::size_t size) {
  if (session_ != nullptr) return session_->Read(into, size);
  Step step;
  for (;;) {
    step.bytes = ::recv(fd_, into, size, 0);
    if (step.bytes >= 0 || errno != EINTR) break;
  }
  if (step.bytes < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    step.wait = POLLIN;
  } else if (step.bytes < 0) {
    step.error = std::strerror(errno);
  }
  return step;
}

absl::Status GrpcChannel::Send(std::string_view bytes, Deadline deadline) {
  while (!bytes.empty()) {
    const Step step = WriteSome(bytes);
    if (step.bytes > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(step.bytes));
      continue;
    }
    if (step.wait != 0) {
      if (absl::Status ready = Wait(step.wait, deadline); !ready.ok()) return ready;
      continue;
    }
    return absl::UnavailableError(
        fmt::format("lost the connection to {}: {}", Describe(),
                    step.error.empty() ? std::string("closed") : step.error));
  }
  return absl::OkStatus();
}

absl::Status GrpcChannel::SendPending(Exchange& exchange) {
  std::string frames;
  QueueData(exchange, frames);
  return frames.empty() ? absl::OkStatus() : Send(frames, exchange.deadline);
}

void GrpcChannel::QueueData(Exchange& exchange, std::string& frames) {
  while (exchange.data_sent < exchange.data.size()) {
    const std::int64_t window = std::min(connection_window_, exchange.send_window);
    if (window <= 0) break;
    const std::size_t size =
        std::min({exchange.data.size() - exchange.data_sent, static_cast<std::size_t>(window),
                  static_cast<std::size_t>(max_frame_size_)});
    const bool last = exchange.data_sent + size == exchange.data.size();
    AppendFrame(frames, kData, last ? kEndStream : 0, exchange.stream,
                std::string_view(exchange.data).substr(exchange.data_sent, size));
    exchange.data_sent += size;
    connection_window_ -= static_cast<std::int64_t>(size);
    exchange.send_window -= static_cast<std::int64_t>(size);
  }
}

absl::Status GrpcChannel::ReadFrame(Deadline deadline) {
  // A frame returned before stays readable until this call reads more.
  for (;;) {
    const std::size_t available = input_.size() - input_start_;
    if (available >= kFrameHeader) {
      const std::string_view head(input_.data() + input_start_, kFrameHeader);
      const std::uint32_t length = (static_cast<std::uint8_t>(head[0]) << 16) |
                                   (static_cast<std::uint8_t>(head[1]) << 8) |
                                   static_cast<std::uint8_t>(head[2]);
      // This side announced no SETTINGS_MAX_FRAME_SIZE: the server may send
      // frames of the default 16 KiB at most (RFC 9113 §4.2).
      if (length > kDefaultMaxFrame) {
        return ProtocolError(
            fmt::format("a frame of {} bytes, more than the {} allowed", length, kDefaultMaxFrame));
      }
      if (available >= kFrameHeader + length) {
        frame_type_ = static_cast<std::uint8_t>(head[3]);
        frame_flags_ = static_cast<std::uint8_t>(head[4]);
        frame_stream_ = Get32(head.substr(5)) & 0x7fffffff;
        frame_payload_ = std::string_view(input_.data() + input_start_ + kFrameHeader, length);
        input_start_ += kFrameHeader + length;
        return absl::OkStatus();
      }
    }
    // Keep what is unread at the front, then read more behind it.
    input_.erase(0, input_start_);
    input_start_ = 0;
    frame_payload_ = {};
    // Read into the string's room behind what it holds, without filling
    // that room first (a resize would clear 256 KiB on every read).
    // (The size the operation is given may be larger than the one asked
    // for: libstdc++ 12 passes the grown capacity.)
    Step got;
    const std::size_t used = input_.size();
    input_.resize_and_overwrite(used + kReadChunk, [&](char* data, std::size_t /*room*/) {
      got = ReadSome(data + used, kReadChunk);
      return used + static_cast<std::size_t>(std::max<ssize_t>(got.bytes, 0));
    });
    if (got.bytes > 0) continue;
    if (got.wait != 0) {
      if (absl::Status ready = Wait(got.wait, deadline); !ready.ok()) return ready;
      continue;
    }
    if (got.error.empty()) {
      const bool plain_tcp = !tls_.on && !tls_host_.empty();
      return absl::UnavailableError(fmt::format(
          "the controller at {} closed the connection{}", Describe(),
          plain_tcp ? " (one that serves TLS closes plain connections: name its TLSCertFile and "
                      "TLSCAFile in the cohort.conf this command reads)"
                    : ""));
    }
    return absl::UnavailableError(
        fmt::format("lost the connection to {}: {}", Describe(), got.error));
  }
}

absl::Status GrpcChannel::HandleSettings(Exchange& exchange, std::string_view payload) {
  if (payload.size() % 6 != 0) return ProtocolError("a SETTINGS frame of a bad length");
  for (std::size_t at = 0; at < payload.size(); at += 6) {
    const auto id = static_cast<std::uint16_t>((static_cast<std::uint8_t>(payload[at]) << 8) |
                                               static_cast<std::uint8_t>(payload[at + 1]));
    const std::uint32_t value = Get32(payload.substr(at + 2));
    if (id == kSettingInitialWindowSize) {
      if (value > kMaxWindow) return ProtocolError("an initial window over 2^31-1");
      // The change applies to the stream already open (RFC 9113 §6.9.2).
      exchange.send_window += static_cast<std::int64_t>(value) - initial_stream_window_;
      initial_stream_window_ = value;
    } else if (id == kSettingMaxFrameSize) {
      if (value < kDefaultMaxFrame || value > 0xffffff) {
        return ProtocolError("a maximum frame size out of range");
      }
      max_frame_size_ = value;
    }
  }
  std::string ack;
  AppendFrame(ack, kSettings, kAck, 0, {});
  return Send(ack, exchange.deadline);
}

absl::Status GrpcChannel::FinishHeaders(Exchange& exchange) {
  exchange.in_header_block = false;
  std::vector<hpack::Field> fields;
  if (absl::Status decoded = decoder_.Decode(exchange.header_block, fields); !decoded.ok()) {
    return ProtocolError(std::string(decoded.message()));
  }
  exchange.header_block.clear();
  if (!exchange.headers_seen) {
    exchange.headers_seen = true;
    const std::string* status = Find(fields, ":status");
    if (status == nullptr ||
        std::from_chars(status->data(), status->data() + status->size(), exchange.http_status)
                .ptr != status->data() + status->size()) {
      return ProtocolError("response headers without a :status");
    }
    // Anything but 200 is not a gRPC server answering (a proxy, say).
    if (exchange.http_status != 200 && Find(fields, "grpc-status") == nullptr) {
      exchange.finished = true;
      exchange.status = absl::Status(
          CodeForHttpStatus(exchange.http_status),
          fmt::format("{} answered HTTP status {}, not gRPC", Describe(), exchange.http_status));
      return absl::OkStatus();
    }
    // Without END_STREAM these are the headers, and the message follows;
    // with it, a trailers-only response (an error, as a rule).
    if (!exchange.block_ends_stream) return absl::OkStatus();
  } else if (!exchange.block_ends_stream) {
    return ProtocolError("a second header block that does not end the stream");
  }
  exchange.finished = true;
  const std::string* code_text = Find(fields, "grpc-status");
  int code = 0;
  if (code_text == nullptr ||
      std::from_chars(code_text->data(), code_text->data() + code_text->size(), code).ptr !=
          code_text->data() + code_text->size() ||
      code < 0 || code > 16) {
    exchange.status = ProtocolError("trailers without a valid grpc-status");
    return absl::OkStatus();
  }
  if (code != 0) {
    const std::string* message = Find(fields, "grpc-message");
    exchange.status = absl::Status(static_cast<absl::StatusCode>(code),
                                   message == nullptr ? "" : PercentDecode(*message));
  }
  return absl::OkStatus();
}

absl::Status GrpcChannel::HandleData(Exchange& exchange, std::string_view payload) {
  // gRPC's length-prefixed messages, which DATA frames cut anywhere.
  exchange.pending.append(payload);
  std::size_t at = 0;
  while (exchange.pending.size() - at >= kGrpcMessageHeader) {
    const std::string_view rest = std::string_view(exchange.pending).substr(at);
    const std::uint32_t length = Get32(rest.substr(1));
    if (length > kMaxResponseMessage) {
      return absl::ResourceExhaustedError(
          fmt::format("the controller's answer is {} MiB, more than the {} MiB this client takes; "
                      "ask for less (filter the listing)",
                      length >> 20, kMaxResponseMessage >> 20));
    }
    if (rest.size() - kGrpcMessageHeader < length) break;
    if (rest[0] != 0) {
      return ProtocolError("a compressed message, which this client did not ask for");
    }
    ++exchange.messages;
    at += kGrpcMessageHeader + length;
    if (!(*exchange.sink)(rest.substr(kGrpcMessageHeader, length))) {
      exchange.finished = true;
      exchange.drop_connection = true;  // the server still sends: this stream is abandoned
      exchange.status = absl::CancelledError("the call was ended by its reader");
      break;
    }
  }
  exchange.pending.erase(0, at);
  return absl::OkStatus();
}

absl::Status GrpcChannel::HandleFrame(Exchange& exchange) {
  std::string_view payload = frame_payload_;
  if (exchange.in_header_block && frame_type_ != kContinuation) {
    return ProtocolError("a header block interrupted by another frame");
  }
  // DATA and HEADERS may be padded; HEADERS may carry a priority.
  const auto strip = [&](bool with_priority) -> absl::Status {
    std::size_t pad = 0;
    if ((frame_flags_ & kPadded) != 0) {
      if (payload.empty()) return ProtocolError("a padded frame without its pad length");
      pad = static_cast<std::uint8_t>(payload.front());
      payload.remove_prefix(1);
    }
    if (with_priority && (frame_flags_ & kPriority) != 0) {
      if (payload.size() < 5) return ProtocolError("a HEADERS frame cut short");
      payload.remove_prefix(5);
    }
    if (pad > payload.size()) return ProtocolError("padding longer than its frame");
    payload.remove_suffix(pad);
    return absl::OkStatus();
  };
  const bool ours = frame_stream_ == exchange.stream;
  switch (frame_type_) {
    case kData: {
      if (!ours) return ProtocolError("DATA on a stream that is not open");
      // Flow control counts the whole payload, padding included.
      const auto size = static_cast<std::int64_t>(frame_payload_.size());
      exchange.received += size;
      connection_received_ += size;
      if (absl::Status stripped = strip(false); !stripped.ok()) return stripped;
      if (!exchange.headers_seen) return ProtocolError("DATA before the response headers");
      if (absl::Status handled = HandleData(exchange, payload); !handled.ok()) return handled;
      if (exchange.finished) return absl::OkStatus();
      if ((frame_flags_ & kEndStream) != 0) {
        exchange.finished = true;
        exchange.status = ProtocolError("the response ended without trailers");
        return absl::OkStatus();
      }
      std::string refill;
      if (connection_received_ >= kWindowRefill) {
        refill += WindowUpdate(0, static_cast<std::uint32_t>(connection_received_));
        connection_received_ = 0;
      }
      if (exchange.received >= kWindowRefill) {
        refill += WindowUpdate(exchange.stream, static_cast<std::uint32_t>(exchange.received));
        exchange.received = 0;
      }
      return refill.empty() ? absl::OkStatus() : Send(refill, exchange.deadline);
    }
    case kHeaders:
      if (!ours) return ProtocolError("HEADERS on a stream this client did not open");
      if (absl::Status stripped = strip(true); !stripped.ok()) return stripped;
      exchange.in_header_block = true;
      exchange.block_ends_stream = (frame_flags_ & kEndStream) != 0;
      exchange.header_block.assign(payload);
      return (frame_flags_ & kEndHeaders) != 0 ? FinishHeaders(exchange) : absl::OkStatus();
    case kContinuation:
      if (!exchange.in_header_block || !ours) return ProtocolError("a stray CONTINUATION");
      exchange.header_block.append(payload);
      if (exchange.header_block.size() > kMaxHeaderBlock) {
        return ProtocolError(
            fmt::format("a header block of more than {} KiB", kMaxHeaderBlock >> 10));
      }
      return (frame_flags_ & kEndHeaders) != 0 ? FinishHeaders(exchange) : absl::OkStatus();
    case kRstStream: {
      if (!ours) return absl::OkStatus();
      if (payload.size() != 4) return ProtocolError("a RST_STREAM frame of a bad length");
      const std::uint32_t error = Get32(payload);
      exchange.finished = true;
      if (error == kRefusedStream && !exchange.headers_seen) {
        exchange.retry = true;
        exchange.status = absl::UnavailableError("the controller refused the call");
      } else if (error == kCancel) {
        exchange.status = absl::CancelledError("the controller cancelled the call");
      } else if (error == kEnhanceYourCalm) {
        exchange.status = absl::ResourceExhaustedError("the controller is shedding load");
      } else {
        exchange.status = absl::InternalError(
            fmt::format("the controller reset the call (HTTP/2 error code {})", error));
      }
      return absl::OkStatus();
    }
    case kSettings:
      if ((frame_flags_ & kAck) != 0) return absl::OkStatus();
      return HandleSettings(exchange, payload);
    case kPushPromise:
      return ProtocolError("PUSH_PROMISE, which this client disabled");
    case kPing: {
      if ((frame_flags_ & kAck) != 0) return absl::OkStatus();
      if (payload.size() != 8) return ProtocolError("a PING frame of a bad length");
      std::string pong;
      AppendFrame(pong, kPing, kAck, 0, payload);
      return Send(pong, exchange.deadline);
    }
    case kGoAway: {
      if (payload.size() < 8) return ProtocolError("a GOAWAY frame cut short");
      // No new call goes on this connection; a call above the last stream
      // the server took was never begun, and may be made again elsewhere.
      going_away_ = true;
      const std::uint32_t last_stream = Get32(payload) & 0x7fffffff;
      if (last_stream < exchange.stream) {
        exchange.finished = true;
        exchange.retry = true;
        exchange.status = absl::UnavailableError(
            fmt::format("the controller at {} is closing its connections", Describe()));
      }
      return absl::OkStatus();
    }
    case kWindowUpdate: {
      if (payload.size() != 4) return ProtocolError("a WINDOW_UPDATE frame of a bad length");
      const std::uint32_t increment = Get32(payload) & 0x7fffffff;
      if (frame_stream_ == 0) connection_window_ += increment;
      if (ours) exchange.send_window += increment;
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();  // PRIORITY, and frame types this client does not know
  }
}

GrpcChannel::Outcome GrpcChannel::Run(Exchange& exchange) {
  const auto fail = [&](absl::Status status) {
    exchange.status = std::move(status);
    exchange.drop_connection = true;
    return Outcome::kDone;
  };
  if (fd_ < 0) {
    if (absl::Status opened = Open(exchange.deadline); !opened.ok()) return fail(opened);
  }
  exchange.stream = next_stream_;
  next_stream_ += 2;
  exchange.send_window = initial_stream_window_;

  // HEADERS, split into CONTINUATIONs past the frame size, behind the
  // connection's greeting when it is new, and what the window takes of the
  // message: the whole call in one write as a rule.
  std::string frames = std::exchange(greeting_, {});
  {
    std::string_view block = exchange.header_block;
    bool first = true;
    do {
      const std::string_view part = block.substr(0, max_frame_size_);
      block.remove_prefix(part.size());
      AppendFrame(frames, first ? kHeaders : kContinuation, block.empty() ? kEndHeaders : 0,
                  exchange.stream, part);
      first = false;
    } while (!block.empty());
    exchange.header_block.clear();
  }
  QueueData(exchange, frames);
  if (absl::Status sent = Send(frames, exchange.deadline); !sent.ok()) return fail(sent);

  while (!exchange.finished) {
    if (canceller_ != nullptr && canceller_->Cancelled()) {
      return fail(absl::CancelledError("the call was cancelled"));
    }
    if (absl::Status sent = SendPending(exchange); !sent.ok()) return fail(sent);
    if (absl::Status read = ReadFrame(exchange.deadline); !read.ok()) return fail(read);
    if (absl::Status handled = HandleFrame(exchange); !handled.ok()) return fail(handled);
  }
  // A connection the server is closing, or one with this stream still open
  // on this side (the server answered before reading the whole request),
  // is not used again.
  if (going_away_ || exchange.data_sent < exchange.data.size()) exchange.drop_connection = true;
  return exchange.retry ? Outcome::kRetry : Outcome::kDone;
}

absl::Status GrpcChannel::Perform(std::string_view method,
                                  const google::protobuf::MessageLite& request,
                                  const Metadata& metadata, Deadline deadline,
                                  const MessageSink& sink, const CallCanceller* canceller) {
  const std::lock_guard lock(mutex_);
  std::string body;
  if (!request.SerializeToString(&body)) {
    return absl::InvalidArgumentError("the request could not be encoded");
  }
  canceller_ = canceller;
  for (int attempt = 0;; ++attempt) {
    Exchange exchange;
    exchange.deadline = deadline;
    exchange.sink = &sink;
    exchange.data.reserve(kGrpcMessageHeader + body.size());
    exchange.data.push_back(0);  // not compressed
    Put32(exchange.data, static_cast<std::uint32_t>(body.size()));
    exchange.data.append(body);
    std::string& block = exchange.header_block;
    hpack::AppendLiteral(block, ":method", "POST");
    hpack::AppendLiteral(block, ":scheme", "http");
    hpack::AppendLiteral(block, ":path", method);
    hpack::AppendLiteral(block, ":authority", authority_);
    hpack::AppendLiteral(block, "te", "trailers");
    hpack::AppendLiteral(block, "content-type", "application/grpc");
    if (deadline != Deadline::max()) {
      hpack::AppendLiteral(block, "grpc-timeout", GrpcTimeout(deadline));
    }
    for (const auto& [key, value] : metadata) hpack::AppendLiteral(block, key, value);

    const Outcome outcome = Run(exchange);
    if (exchange.drop_connection) Close();
    // A retry begins again from the first message: only when none was taken.
    if (outcome == Outcome::kRetry && attempt == 0 && exchange.messages == 0) {
      Close();
      continue;
    }
    canceller_ = nullptr;
    if (exchange.status.ok() && !exchange.pending.empty()) {
      return ProtocolError("the response ended inside a message");
    }
    return exchange.status;
  }
}

absl::Status GrpcChannel::Call(std::string_view method,
                               const google::protobuf::MessageLite& request,
                               google::protobuf::MessageLite& response, const Metadata& metadata,
                               Deadline deadline) {
  std::size_t messages = 0;
  bool decoded = true;
  const MessageSink take_one = [&](std::string_view message) {
    if (++messages == 1) {
      decoded = response.ParseFromArray(message.data(), static_cast<int>(message.size()));
    }
    return true;
  };
  if (absl::Status status = Perform(method, request, metadata, deadline, take_one, nullptr);
      !status.ok()) {
    return status;
  }
  if (messages != 1) {
    return ProtocolError(fmt::format("a unary response of {} messages", messages));
  }
  if (!decoded) return absl::InternalError("the controller's response could not be decoded");
  return absl::OkStatus();
}

absl::Status GrpcChannel::ServerStream(std::string_view method,
                                       const google::protobuf::MessageLite& request,
                                       const Metadata& metadata, const MessageSink& sink,
                                       const CallCanceller& canceller) {
  // A cancelled stream leaves the server sending on its connection: Run
  // (or HandleData, when `sink` ends it) has the connection dropped.
  return Perform(method, request, metadata, Deadline::max(), sink, &canceller);
}

}  // namespace cohort::cli
