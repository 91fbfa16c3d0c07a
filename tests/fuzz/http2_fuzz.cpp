// SPDX-License-Identifier: Apache-2.0
// A fuzz target over what the CLI's client takes from a server: the bytes
// of a connection after the client sent one call, through libnghttp2's
// framing and HPACK (Http2Session) and the gRPC layer (GrpcCall: headers,
// length-prefixed messages, trailers). The first byte sets the size of the
// reads the bytes come in. The client may fail the call; it must never
// crash, hang, or hold more than its bounds.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "transport/grpc_call.h"
#include "transport/http2_session.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "contract broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using cohort::cli::GrpcCall;
  using cohort::cli::Http2Session;
  if (size == 0) return 0;
  const std::size_t chunk = 1 + data[0] % 64;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<std::unique_ptr<Http2Session>> session = Http2Session::Client();
  Require(session.ok(), "no session");
  std::size_t handed = 0;
  const GrpcCall::Sink sink = [&](std::string_view /*message*/) {
    ++handed;
    return true;
  };
  GrpcCall call("request", sink);
  const Http2Session::Headers headers = GrpcCall::RequestHeaders(
      "/cohort.v1.Controller/GetJob", "http", "localhost", GrpcCall::Deadline::max(), {});
  Require((*session)->Request(headers, call).ok(), "no stream");
  Require((*session)->Output().ok(), "no preface");
  while (!input.empty() && !call.Finished()) {
    const std::string_view part = input.substr(0, chunk);
    input.remove_prefix(part.size());
    const absl::Status fed = (*session)->Feed(part);
    if (!fed.ok()) {
      Require(!fed.message().empty(), "a failure without a message");
      return 0;
    }
    if (!(*session)->Output().ok()) return 0;
  }
  Require(call.Messages() == handed, "a message counted but not handed over");
  return 0;
}
