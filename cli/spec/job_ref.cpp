// SPDX-License-Identifier: Apache-2.0
#include "spec/job_ref.h"

#include <cctype>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace cohort::cli {
namespace {

// A plain decimal number: digits only (no sign, no blanks), not too large.
template <typename Int>
std::optional<Int> Digits(std::string_view text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text.front())) == 0) {
    return std::nullopt;
  }
  Int n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

}  // namespace

absl::StatusOr<JobRef> ParseJobRef(std::string_view text, std::string_view verb) {
  const std::size_t underscore = text.find('_');
  const std::optional<std::int64_t> job = Digits<std::int64_t>(text.substr(0, underscore));
  std::optional<int> task = -1;
  if (underscore != std::string_view::npos) task = Digits<int>(text.substr(underscore + 1));
  if (!job || *job < 1 || !task) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: \"{}\" is not a job; write a job id such as 12, or 12_3 for task 3 of array 12 (see "
        "cohort queue)",
        verb, text));
  }
  return JobRef{*job, *task};
}

absl::StatusOr<std::vector<JobRef>> ParseJobRefs(const std::vector<std::string>& words,
                                                 std::string_view verb) {
  if (words.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: no job given; name one or more, such as 12 or 12_3", verb));
  }
  std::vector<JobRef> refs;
  for (const std::string& word : words) {
    absl::StatusOr<JobRef> ref = ParseJobRef(word, verb);
    if (!ref.ok()) return ref.status();
    refs.push_back(*ref);
  }
  return refs;
}

std::string FormatJobRef(const JobRef& ref) {
  return ref.task < 0 ? std::to_string(ref.job) : fmt::format("{}_{}", ref.job, ref.task);
}

absl::StatusOr<JobRef> JobRefFromEnvironment(std::string_view cohort_job_id,
                                             std::string_view slurm_job_id, std::string_view verb) {
  const bool from_cohort = !cohort_job_id.empty();
  const std::string_view value = from_cohort ? cohort_job_id : slurm_job_id;
  if (value.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: no job given, and neither COHORT_JOB_ID nor SLURM_JOB_ID is set; run it inside a "
        "job, or name the job: cohort {} JOB",
        verb, verb));
  }
  absl::StatusOr<JobRef> ref = ParseJobRef(value, verb);
  if (!ref.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} is \"{}\", not a job id; name the job: cohort {} JOB", verb,
                    from_cohort ? "COHORT_JOB_ID" : "SLURM_JOB_ID", value, verb));
  }
  return ref;
}

}  // namespace cohort::cli
