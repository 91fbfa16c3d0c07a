// SPDX-License-Identifier: Apache-2.0
// A fuzz target over every request message the controller decodes: each
// unary call's request of the Controller service, WatchJob's, and an
// agent's messages, parsed from the same bytes; then what the controller
// itself takes apart of them (a submitted spec into the engine's request,
// job references), and what the REST API decodes of a request's text (a
// query string into request messages, a token). Any of them may be
// refused; none may crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api_token.h"
#include "cohort/v1/cohort.pb.h"
#include "cohort/v1/controller_rpcs.h"
#include "web_service.h"
#include "wire.h"

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
#define COHORT_FUZZ_DECODE(Method, Request, Response, Area, Caller) \
  {                                                                 \
    v1::Request request;                                            \
    (void)Decode(data, size, request);                              \
  }
  COHORT_CONTROLLER_RPCS(COHORT_FUZZ_DECODE)
#undef COHORT_FUZZ_DECODE
  v1::WatchJobRequest watch;
  (void)Decode(data, size, watch);
  v1::AgentMessage agent;
  (void)Decode(data, size, agent);

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
