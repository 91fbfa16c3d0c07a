// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/dependency.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "cohort/diagnostics.h"

namespace cohort {
namespace {

constexpr std::array<DependencyType, 4> kJobTypes = {
    DependencyType::kAfter, DependencyType::kAfterOk, DependencyType::kAfterNotOk,
    DependencyType::kAfterAny};
constexpr std::string_view kKnown = "after, afterok, afternotok, afterany, singleton";

absl::Status BadDependency(std::string_view part, std::string_view problem) {
  return absl::InvalidArgumentError(fmt::format("dependency: \"{}\": {}", part, problem));
}

template <typename Int>
bool ParseNumber(std::string_view text, Int& out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

// One job id of a term: `J` or `J_i`.
absl::Status ParseJobId(std::string_view term, std::string_view id, DependencyTerm& out) {
  if (id.empty()) return BadDependency(term, "an empty job id; write type:JOB[:JOB…], as afterok:12:13");
  if (id.find('+') != std::string_view::npos) {
    return BadDependency(term,
               "Slurm's after:JOB+MINUTES is not supported; depend on the job starting "
               "(after:JOB) or ending (afterany:JOB)");
  }
  const std::size_t underscore = id.find('_');
  const std::string_view job = id.substr(0, underscore);
  if (!ParseNumber(job, out.job) || out.job < 1) {
    return BadDependency(term, fmt::format("\"{}\" is not a job id; ids are positive whole numbers, with "
                                 "_TASK for one task of an array (12_3)",
                                 id));
  }
  if (underscore != std::string_view::npos) {
    const std::string_view task = id.substr(underscore + 1);
    if (!ParseNumber(task, out.array_task) || out.array_task < 0) {
      return BadDependency(term, fmt::format("\"{}\": the array task after '_' must be a whole number 0 or "
                                   "more, as 12_3",
                                   id));
    }
  }
  return absl::OkStatus();
}

// One `type:ID[:ID…]` or `singleton` term, appended to `out`.
absl::Status ParseTerm(std::string_view term, std::vector<DependencyTerm>& out) {
  if (term.empty()) {
    return absl::InvalidArgumentError(
        "dependency: an empty term; remove the extra ',' or '?' (terms are type:JOB or "
        "singleton)");
  }
  const std::size_t colon = term.find(':');
  const std::string_view type = term.substr(0, colon);
  if (EqualsIgnoreCase(type, "singleton")) {
    if (colon != std::string_view::npos) {
      return BadDependency(term, "singleton takes no job ids; write singleton alone");
    }
    out.push_back({DependencyType::kSingleton, 0, -1});
    return absl::OkStatus();
  }
  const auto* found = std::find_if(kJobTypes.begin(), kJobTypes.end(), [&](DependencyType t) {
    return EqualsIgnoreCase(type, DependencyTypeName(t));
  });
  if (found == kJobTypes.end()) {
    if (EqualsIgnoreCase(type, "aftercorr") || EqualsIgnoreCase(type, "expand") ||
        EqualsIgnoreCase(type, "afterburstbuffer")) {
      return BadDependency(term, fmt::format("Slurm's {} is not supported; use one of {}", type, kKnown));
    }
    return BadDependency(term, fmt::format("unknown dependency type \"{}\"; use one of {}", type, kKnown));
  }
  if (colon == std::string_view::npos || colon + 1 == term.size()) {
    return BadDependency(term, fmt::format("{} needs job ids, as {}:12 or {}:12:13", type,
                                 DependencyTypeName(*found), DependencyTypeName(*found)));
  }
  for (std::size_t start = colon + 1;;) {
    const std::size_t next = term.find(':', start);
    DependencyTerm parsed;
    parsed.type = *found;
    const absl::Status status = ParseJobId(
        term, term.substr(start, next == std::string_view::npos ? next : next - start), parsed);
    if (!status.ok()) return status;
    out.push_back(parsed);
    if (next == std::string_view::npos) return absl::OkStatus();
    start = next + 1;
  }
}

}  // namespace

std::string_view DependencyTypeName(DependencyType type) {
  switch (type) {
    case DependencyType::kAfter:
      return "after";
    case DependencyType::kAfterOk:
      return "afterok";
    case DependencyType::kAfterNotOk:
      return "afternotok";
    case DependencyType::kAfterAny:
      return "afterany";
    case DependencyType::kSingleton:
      return "singleton";
  }
  return "afterany";
}

absl::StatusOr<Dependency> ParseDependency(std::string_view text) {
  Dependency dependency;
  if (text.empty()) return dependency;
  const bool has_comma = text.find(',') != std::string_view::npos;
  const bool has_question = text.find('?') != std::string_view::npos;
  if (has_comma && has_question) {
    return BadDependency(text, "mixes ',' (all must hold) and '?' (any one is enough); use one of them");
  }
  dependency.any_of = has_question;
  const char separator = has_question ? '?' : ',';
  for (std::size_t start = 0;;) {
    const std::size_t next = text.find(separator, start);
    const absl::Status status = ParseTerm(
        text.substr(start, next == std::string_view::npos ? next : next - start), dependency.terms);
    if (!status.ok()) return status;
    if (next == std::string_view::npos) break;
    start = next + 1;
  }
  return dependency;
}

std::string FormatDependency(const Dependency& dependency) {
  std::string out;
  const char separator = dependency.any_of ? '?' : ',';
  // Consecutive terms of one type share a term, as `after:5:6`.
  for (std::size_t i = 0; i < dependency.terms.size(); ++i) {
    const DependencyTerm& term = dependency.terms[i];
    const bool continues = i > 0 && term.type != DependencyType::kSingleton &&
                           dependency.terms[i - 1].type == term.type;
    if (continues) {
      out += ':';
    } else {
      if (i > 0) out += separator;
      out += DependencyTypeName(term.type);
      if (term.type == DependencyType::kSingleton) continue;
      out += ':';
    }
    out += fmt::format("{}", term.job);
    if (term.array_task >= 0) out += fmt::format("_{}", term.array_task);
  }
  return out;
}

}  // namespace cohort
