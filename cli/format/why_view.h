// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/v1/cohort.pb.h"

/// `cohort why` in words: the controller answers with facts (a reason, the
/// jobs ahead, the leaves that come closest, the changes that would start
/// the job now) and this view says them, naming the commands that act on
/// them. No I/O, no clock, so that tests check the exact text.
namespace cohort::cli {

/// What `cohort why` says of one job.
struct WhyWords {
  std::string summary;                   ///< one sentence
  std::vector<std::string> blockers;     ///< each thing in its way, most decisive first
  std::vector<std::string> suggestions;  ///< changes that would let it start sooner
};

/// The words for the facts of `response`; "how long until the expected
/// start" counts from the time the controller explained it.
[[nodiscard]] WhyWords WhyInWords(const v1::ExplainJobResponse& response);

/// `cohort why` as text: the job, its state and reason, the summary, the
/// blockers as a list, the expected start (pending jobs only; when it is
/// known, also how far from `now_ms`), and the suggestions as a list. Each
/// part that is empty is left out, except the expected start of a pending
/// job, which says when it is unknown.
[[nodiscard]] std::string ExplainText(const v1::ExplainJobResponse& response, std::int64_t now_ms);

/// `{"job": JOB, "summary", "blockers": [...], "expected_start_ms" (null:
/// unknown), "suggestions": [...], "pending_reason" (null: not pending),
/// "wait": {...}, "sooner": {...}}` with JOB as JobToJson writes it, and
/// the facts under the names the protocol gives them.
[[nodiscard]] nlohmann::ordered_json ExplainToJson(const v1::ExplainJobResponse& response,
                                                   std::int64_t now_ms);

}  // namespace cohort::cli
