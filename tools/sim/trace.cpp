// SPDX-License-Identifier: Apache-2.0
#include "trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>

#include "cohort/text/slurm_time.h"

namespace cohort::sim {
namespace {

enum Column {
  kSubmit,
  kUser,
  kAccount,
  kPartition,
  kNodes,
  kGpus,
  kRuntime,
  kLimit,
  kQos,
  kSegment,
  kCount
};
constexpr std::array<std::string_view, kCount> kNames = {
    "submit_time",   "user",    "account",    "partition", "nodes",
    "gpus_per_node", "runtime", "time_limit", "qos",       "segment"};

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    std::string_view field =
        line.substr(start, comma == std::string_view::npos ? comma : comma - start);
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t'))
      field.remove_prefix(1);
    while (!field.empty() &&
           (field.back() == ' ' || field.back() == '\t' || field.back() == '\r')) {
      field.remove_suffix(1);
    }
    fields.push_back(field);
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

std::optional<std::int64_t> ParseInteger(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

absl::StatusOr<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view file) {
  std::array<int, kCount> index{};
  index.fill(-1);
  bool have_header = false;
  std::size_t columns = 0;
  std::vector<TraceJob> jobs;
  int line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const std::string_view trimmed = SplitFields(line).front();
    if (line.find_first_not_of(" \t\r") == std::string_view::npos || trimmed.starts_with('#')) {
      continue;
    }
    const std::vector<std::string_view> fields = SplitFields(line);
    const auto invalid = [&](std::string_view column, std::string_view why) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: {}: {}", file, line_number, column, why));
    };
    if (!have_header) {
      have_header = true;
      columns = fields.size();
      for (std::size_t i = 0; i < fields.size(); ++i) {
        const auto it = std::find(kNames.begin(), kNames.end(), fields[i]);
        if (it == kNames.end()) {
          return invalid(fields[i], fmt::format("not a trace column; the header names some of {}",
                                                kTraceHeader));
        }
        int& slot = index[static_cast<std::size_t>(it - kNames.begin())];
        if (slot >= 0) return invalid(fields[i], "named twice in the header; name it once");
        slot = static_cast<int>(i);
      }
      for (int column : {kSubmit, kUser, kAccount, kNodes, kGpus, kRuntime, kLimit}) {
        if (index[static_cast<std::size_t>(column)] < 0) {
          return invalid(
              kNames[static_cast<std::size_t>(column)],
              fmt::format("missing from the header; a trace starts with {}", kTraceHeader));
        }
      }
      continue;
    }
    if (fields.size() != columns) {
      return invalid("line", fmt::format("has {} fields but the header names {}; write one value "
                                         "per column (empty for none)",
                                         fields.size(), columns));
    }
    const auto field = [&](Column column) {
      const int i = index[static_cast<std::size_t>(column)];
      return i < 0 ? std::string_view() : fields[static_cast<std::size_t>(i)];
    };
    TraceJob job;
    const auto seconds = [&](Column column) -> absl::StatusOr<std::chrono::seconds> {
      const std::optional<std::int64_t> value = ParseInteger(field(column));
      if (!value || *value < 0) {
        return invalid(kNames[column], fmt::format("\"{}\" is not a whole number of seconds (0 or "
                                                   "more)",
                                                   field(column)));
      }
      return std::chrono::seconds(*value);
    };
    absl::StatusOr<std::chrono::seconds> submit = seconds(kSubmit);
    if (!submit.ok()) return submit.status();
    job.submit_time = *submit;
    absl::StatusOr<std::chrono::seconds> runtime = seconds(kRuntime);
    if (!runtime.ok()) return runtime.status();
    job.runtime = *runtime;
    const std::string_view limit = field(kLimit);
    if (limit.empty()) {
      job.time_limit = std::chrono::seconds(0);
    } else if (AllDigits(limit)) {
      job.time_limit = std::chrono::seconds(*ParseInteger(limit));
    } else {
      absl::StatusOr<std::chrono::seconds> parsed = ParseSlurmTime(limit);
      if (!parsed.ok()) {
        return invalid("time_limit",
                       fmt::format("\"{}\" is neither seconds nor a Slurm time (1:30:00, "
                                   "2-00:00:00, UNLIMITED)",
                                   limit));
      }
      job.time_limit = *parsed;
    }
    const std::optional<std::int64_t> nodes = ParseInteger(field(kNodes));
    if (!nodes || *nodes < 1 || *nodes > 1'000'000) {
      return invalid("nodes",
                     fmt::format("\"{}\" is not a node count of 1 or more", field(kNodes)));
    }
    job.nodes = static_cast<int>(*nodes);
    const std::optional<std::int64_t> gpus = ParseInteger(field(kGpus));
    if (!gpus || *gpus < 0 || *gpus > 64) {
      return invalid("gpus_per_node",
                     fmt::format("\"{}\" is not a GPU count from 0 to 64", field(kGpus)));
    }
    job.gpus_per_node = static_cast<int>(*gpus);
    job.user = std::string(field(kUser));
    if (job.user.empty()) return invalid("user", "is empty; name the job's user");
    job.account = std::string(field(kAccount));
    job.partition = std::string(field(kPartition));
    job.qos = std::string(field(kQos));
    if (!field(kSegment).empty()) {
      const std::optional<std::int64_t> segment = ParseInteger(field(kSegment));
      if (!segment || *segment < 1 || job.nodes % *segment != 0) {
        return invalid("segment", fmt::format("\"{}\" is not a segment size that divides the job's "
                                              "{} nodes; write one, or leave it empty for none",
                                              field(kSegment), job.nodes));
      }
      job.segment = static_cast<int>(*segment);
    }
    jobs.push_back(std::move(job));
  }
  if (!have_header) {
    return absl::InvalidArgumentError(
        fmt::format("{}: no header line; a trace starts with {}", file, kTraceHeader));
  }
  return jobs;
}

std::string FormatTrace(const std::vector<TraceJob>& jobs) {
  const bool segments =
      std::any_of(jobs.begin(), jobs.end(), [](const TraceJob& job) { return job.segment > 0; });
  std::string out = fmt::format("{}{}\n", kTraceHeader, segments ? ",segment" : "");
  for (const TraceJob& job : jobs) {
    const std::string limit = job.time_limit == kUnlimited
                                  ? std::string("UNLIMITED")
                                  : fmt::format("{}", job.time_limit.count());
    out += fmt::format("{},{},{},{},{},{},{},{},{}", job.submit_time.count(), job.user, job.account,
                       job.partition, job.nodes, job.gpus_per_node, job.runtime.count(), limit,
                       job.qos);
    if (segments) out += job.segment > 0 ? fmt::format(",{}", job.segment) : ",";
    out += '\n';
  }
  return out;
}

}  // namespace cohort::sim
