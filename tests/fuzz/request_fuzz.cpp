// SPDX-License-Identifier: Apache-2.0
// A fuzz target over every request message the controller decodes: each
// unary call's request of the Controller service, WatchJob's, and an
// agent's messages, parsed from the same bytes; then what the controller
// itself takes apart of them (a submitted spec into the engine's request,
// job references), the bounds every request is held to, what the REST
// API decodes of a request's text (a query string into request messages,
// a token), and the bytes as an HTTP/2 client's, split at the first byte's
// say, through the guard's frame watch. Any of them may be refused; none
// may crash, and a refusal says why.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cohort/v1/cohort.pb.h"
#include "cohort/v1/controller_rpcs.h"
#include "http/web_service.h"
#include "rpc/api_token.h"
#include "rpc/h2_frame_watch.h"
#include "rpc/request_bounds.h"
#include "store/wire.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "contract broken: %s\n", what);
    std::abort();
  }
}

template <typename Message>
bool Decode(const std::uint8_t* data, std::size_t size, Message& out) {
  return out.ParseFromArray(data, static_cast<int>(size));
}

void Refs(std::string_view text) {
  const absl::StatusOr<cohort::JobRef> ref = cohort::controller::ParseJobRef(text);
  if (!ref.ok()) Require(!ref.status().message().empty(), "a refused job reference says nothing");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace v1 = cohort::v1;
#define COHORT_FUZZ_DECODE(Method, Request, Response, Area, Caller)                          \
  {                                                                                          \
    v1::Request request;                                                                     \
    if (Decode(data, size, request)) {                                                       \
      const absl::Status bounded = cohort::controller::CheckRequestBounds(request);          \
      Require(bounded.ok() || !bounded.message().empty(), "a refused request says nothing"); \
    }                                                                                        \
  }
  COHORT_CONTROLLER_RPCS(COHORT_FUZZ_DECODE)
#undef COHORT_FUZZ_DECODE
  v1::WatchJobRequest watch;
  (void)Decode(data, size, watch);
  v1::AgentMessage agent;
  if (Decode(data, size, agent)) {
    const absl::Status bounded = cohort::controller::CheckRequestBounds(agent);
    Require(bounded.ok() || !bounded.message().empty(), "a refused agent message says nothing");
  }
  if (size > 0) {
    // The guard reads a client's bytes in whatever pieces they arrive.
    cohort::controller::FrameWatch frames;
    const std::size_t piece = 1 + data[0] % 97;
    std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::string verdict;
    while (!rest.empty() && verdict.empty()) {
      verdict = frames.FromClient(rest.substr(0, piece), std::chrono::milliseconds(0));
      frames.FromServer(rest.substr(0, piece));
      rest.remove_prefix(std::min(piece, rest.size()));
    }
  }

  v1::SubmitJobRequest submit;
  if (Decode(data, size, submit)) {
    cohort::controller::Identity who;
    who.uid = 1000;
    who.user_name = "alice";
    who.trust = cohort::controller::Identity::Trust::kMunge;
    const absl::StatusOr<cohort::JobRequest> request =
        cohort::controller::RequestFromSpec(submit.spec(), who, 1001);
    if (!request.ok()) Require(!request.status().message().empty(), "a refused spec says nothing");
  }
  v1::GetJobRequest get;
  if (Decode(data, size, get)) Refs(get.job_ref());
  v1::CancelJobRequest cancel;
  if (Decode(data, size, cancel)) {
    for (const std::string& ref : cancel.job_refs()) Refs(ref);
  }
  v1::UpdateJobRequest update;
  if (Decode(data, size, update)) Refs(update.job_ref());

  // The REST API's: the bytes as a query string and as a bearer token.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  v1::ListJobsRequest list;
  const absl::Status query = cohort::controller::MessageFromQuery(text, list);
  Require(query.ok() || !query.message().empty(), "a refused query says nothing");
  v1::JobHistoryRequest history;
  (void)cohort::controller::MessageFromQuery(text, history);
  static const cohort::controller::TokenSigner signer =
      cohort::controller::TokenSigner::FromKey(std::string(32, 'k'));
  const absl::StatusOr<cohort::controller::TokenClaims> claims = signer.Verify(text);
  Require(!claims.ok(), "a token nobody signed was taken");
  (void)cohort::controller::Base64UrlDecode(text);
  return 0;
}
