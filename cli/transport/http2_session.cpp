// SPDX-License-Identifier: Apache-2.0
#include "transport/http2_session.h"

#include <algorithm>

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

namespace cohort::cli {
namespace {

// What a server may make this client hold in one header block (names and
// values together, as SETTINGS_MAX_HEADER_LIST_SIZE counts them less its
// 32 bytes a field); past it the connection fails with a clear error.
constexpr std::size_t kMaxHeaderBlock = 256 * 1024;

std::string_view FrameName(std::uint8_t type) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "DATA",         "HEADERS", "PRIORITY", "RST_STREAM",    "SETTINGS",
      "PUSH_PROMISE", "PING",    "GOAWAY",   "WINDOW_UPDATE", "CONTINUATION"};
  return type < kNames.size() ? kNames[type] : "unknown";
}

Http2Stream::Block BlockOf(const nghttp2_frame* frame) {
  return frame->headers.cat == NGHTTP2_HCAT_HEADERS ? Http2Stream::Block::kTrailers
                                                    : Http2Stream::Block::kHeaders;
}

}  // namespace

// A stream's state the callbacks reach through nghttp2's stream user data.
struct Http2StreamState {
  Http2Stream* stream = nullptr;
  std::size_t sent = 0;          ///< of the body
  std::size_t header_bytes = 0;  ///< of the block being received
};

// nghttp2's callbacks, with access to the session's private state.
struct Http2Callbacks {
  static Http2Session& Of(void* user_data) { return *static_cast<Http2Session*>(user_data); }

  static Http2StreamState* State(nghttp2_session* session, std::int32_t id) {
    return static_cast<Http2StreamState*>(nghttp2_session_get_stream_user_data(session, id));
  }

  // A stream callback's error fails the connection; Feed returns it.
  static int Fail(void* user_data, absl::Status status) {
    if (status.ok()) return 0;
    Http2Session& self = Of(user_data);
    if (self.failure_.ok()) self.failure_ = std::move(status);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame,
                            void* /*user_data*/) {
    if (Http2StreamState* state = State(session, frame->hd.stream_id)) state->header_bytes = 0;
    return 0;
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame,
                      const std::uint8_t* name, std::size_t name_length, const std::uint8_t* value,
                      std::size_t value_length, std::uint8_t /*flags*/, void* user_data) {
    Http2StreamState* state = State(session, frame->hd.stream_id);
    if (state == nullptr || frame->hd.type != NGHTTP2_HEADERS) return 0;
    state->header_bytes += name_length + value_length;
    if (state->header_bytes > kMaxHeaderBlock) {
      return Fail(user_data, absl::ResourceExhaustedError(fmt::format(
                                 "the controller sent a header block of more than {} KiB",
                                 kMaxHeaderBlock >> 10)));
    }
    return Fail(
        user_data,
        state->stream->OnHeader(
            BlockOf(frame), std::string_view(reinterpret_cast<const char*>(name), name_length),
            std::string_view(reinterpret_cast<const char*>(value), value_length)));
  }

  static int OnFrame(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      Http2Session& self = Of(user_data);
      self.going_away_ = true;
      if (frame->goaway.error_code != NGHTTP2_NO_ERROR && frame->goaway.opaque_data_len > 0) {
        // Bounded: it is shown to the user as the server's reason.
        self.going_away_why_.assign(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                    std::min<std::size_t>(frame->goaway.opaque_data_len, 512));
      }
      return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Http2StreamState* state = State(session, frame->hd.stream_id);
    if (state == nullptr) return 0;
    return Fail(user_data, state->stream->OnHeaderBlock(
                               BlockOf(frame), (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0));
  }

  static int OnData(nghttp2_session* session, std::uint8_t /*flags*/, std::int32_t id,
                    const std::uint8_t* data, std::size_t length, void* user_data) {
    Http2StreamState* state = State(session, id);
    if (state == nullptr) return 0;
    return Fail(user_data, state->stream->OnData(
                               std::string_view(reinterpret_cast<const char*>(data), length)));
  }

  static int OnClose(nghttp2_session* session, std::int32_t id, std::uint32_t error_code,
                     void* user_data) {
    Http2StreamState* state = State(session, id);
    if (state == nullptr) return 0;
    state->stream->OnClose(error_code);
    nghttp2_session_set_stream_user_data(session, id, nullptr);
    Of(user_data).streams_.erase(id);
    return 0;
  }

  static int OnBeginFrame(nghttp2_session* /*session*/, const nghttp2_frame_hd* header,
                          void* user_data) {
    Of(user_data).last_frame_type_ = header->type;
    return 0;
  }

  // This side's GOAWAY with an error: nghttp2 found a breach.
  static int OnFrameSent(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                         void* user_data) {
    if (frame->hd.type != NGHTTP2_GOAWAY || frame->goaway.error_code == NGHTTP2_NO_ERROR) return 0;
    Http2Session& self = Of(user_data);
    // A frame that fails its header's checks is never begun: before any
    // was, it is the server's preface, its SETTINGS frame.
    const std::string what =
        self.last_frame_type_
            ? fmt::format("{} after a {} frame", nghttp2_http2_strerror(frame->goaway.error_code),
                          FrameName(*self.last_frame_type_))
            : fmt::format("{} in the server's preface (its first SETTINGS frame)",
                          nghttp2_http2_strerror(frame->goaway.error_code));
    self.error_text_ =
        self.error_text_.empty() ? what : fmt::format("{} ({})", self.error_text_, what);
    return 0;
  }

  static int OnError(nghttp2_session* /*session*/, int /*code*/, const char* message,
                     std::size_t length, void* user_data) {
    Http2Session& self = Of(user_data);
    if (self.error_text_.empty()) self.error_text_.assign(message, length);
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session* session, std::int32_t id, std::uint8_t* buffer,
                          std::size_t length, std::uint32_t* flags, nghttp2_data_source* /*source*/,
                          void* /*user_data*/) {
    Http2StreamState* state = State(session, id);
    if (state == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::string_view body = state->stream->Body();
    const std::size_t size = std::min(length, body.size() - state->sent);
    std::memcpy(buffer, body.data() + state->sent, size);
    state->sent += size;
    if (state->sent == body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(size);
  }
};

absl::StatusOr<std::unique_ptr<Http2Session>> Http2Session::Client() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) {
    return absl::ResourceExhaustedError("HTTP/2: out of memory");
  }
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                          &Http2Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Http2Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Http2Callbacks::OnFrame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &Http2Callbacks::OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &Http2Callbacks::OnClose);
  nghttp2_session_callbacks_set_error_callback2(callbacks, &Http2Callbacks::OnError);
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, &Http2Callbacks::OnBeginFrame);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &Http2Callbacks::OnFrameSent);
  std::unique_ptr<Http2Session> self(new Http2Session());
  const int made = nghttp2_session_client_new(&self->session_, callbacks, self.get());
  nghttp2_session_callbacks_del(callbacks);
  if (made != 0) return absl::ResourceExhaustedError("HTTP/2: out of memory");
  // No server push; the largest stream and connection windows.
  const std::array<nghttp2_settings_entry, 3> settings = {{
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, NGHTTP2_MAX_WINDOW_SIZE},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(kMaxHeaderBlock)},
  }};
  nghttp2_submit_settings(self->session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  nghttp2_session_set_local_window_size(self->session_, NGHTTP2_FLAG_NONE, 0,
                                        NGHTTP2_MAX_WINDOW_SIZE);
  return self;
}

Http2Session::Http2Session() = default;
Http2Session::~Http2Session() { nghttp2_session_del(session_); }

absl::StatusOr<std::int32_t> Http2Session::Request(const Headers& headers, Http2Stream& stream) {
  std::vector<nghttp2_nv> fields;
  fields.reserve(headers.size());
  for (const auto& [name, value] : headers) {
    fields.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  auto state = std::make_unique<Http2StreamState>(Http2StreamState{&stream, 0, 0});
  nghttp2_data_provider body{};
  body.read_callback = &Http2Callbacks::ReadBody;
  const std::int32_t id =
      nghttp2_submit_request(session_, nullptr, fields.data(), fields.size(), &body, state.get());
  if (id < 0) return absl::UnavailableError(fmt::format("HTTP/2: {}", nghttp2_strerror(id)));
  streams_.emplace(id, std::move(state));
  return id;
}

void Http2Session::Reset(std::int32_t stream) {
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, NGHTTP2_CANCEL);
}

absl::StatusOr<std::string> Http2Session::Output() {
  std::string out;
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t size = nghttp2_session_mem_send(session_, &data);
    if (size < 0) {
      return absl::InternalError(
          fmt::format("HTTP/2: {}", nghttp2_strerror(static_cast<int>(size))));
    }
    if (size == 0) return out;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
  }
}

absl::Status Http2Session::Ended() const {
  if (nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0) {
    return absl::OkStatus();
  }
  return absl::InternalError(
      fmt::format("the controller broke the HTTP/2 protocol: {}",
                  error_text_.empty() ? std::string("it ended the connection") : error_text_));
}

absl::Status Http2Session::Feed(std::string_view bytes) {
  const ssize_t taken = nghttp2_session_mem_recv(
      session_, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  if (taken >= 0) return absl::OkStatus();
  if (!failure_.ok()) return failure_;
  return absl::InternalError(
      fmt::format("the controller broke the HTTP/2 protocol: {}",
                  error_text_.empty() ? nghttp2_strerror(static_cast<int>(taken)) : error_text_));
}

}  // namespace cohort::cli
