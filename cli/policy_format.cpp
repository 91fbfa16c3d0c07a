// SPDX-License-Identifier: Apache-2.0
#include "policy_format.h"

#include <string_view>

#include <fmt/format.h>

#include "job_format.h"

namespace cohort::cli {
namespace {

std::string Weighted(double value) { return fmt::format("{:.0f}", value); }
std::string Normalised(double value) { return fmt::format("{:.4f}", value); }

// A list item, the item's later lines indented under its first word.
void AppendItem(std::string& out, const std::string& text) {
  std::string indented;
  for (const char c : text) {
    indented += c;
    if (c == '\n') indented += "    ";
  }
  out += fmt::format("  - {}\n", indented);
}

}  // namespace

std::vector<std::vector<std::string>> PriorityRows(const v1::PriorityResponse& response,
                                                   PriorityValues values) {
  std::vector<std::vector<std::string>> rows = {
      {"JOBID", "USER", "ACCOUNT", "PARTITION", "QOS", "PRIORITY", "AGE", "FAIRSHARE", "JOBSIZE",
       "PARTITION", "QOS"},
      {"Weights", "", "", "", "", "", std::to_string(response.weight_age()),
       std::to_string(response.weight_fairshare()), std::to_string(response.weight_job_size()),
       std::to_string(response.weight_partition()), std::to_string(response.weight_qos())},
  };
  for (const v1::JobPriority& job : response.jobs()) {
    std::vector<std::string>& row = rows.emplace_back();
    row = {job.display_id().empty() ? std::to_string(job.job_id()) : job.display_id(),
           job.user_name(),
           job.account(),
           job.partition(),
           job.qos(),
           std::to_string(job.total())};
    if (values == PriorityValues::kWeighted) {
      for (const double v :
           {job.age(), job.fairshare(), job.job_size(), job.partition_factor(), job.qos_factor()}) {
        row.push_back(Weighted(v));
      }
    } else {
      for (const double v : {job.age_raw(), job.fairshare_raw(), job.job_size_raw(),
                             job.partition_raw(), job.qos_raw()}) {
        row.push_back(Normalised(v));
      }
    }
  }
  return rows;
}

nlohmann::ordered_json PrioritiesToJson(const v1::PriorityResponse& response) {
  nlohmann::ordered_json out;
  out["weights"] = {{"age", response.weight_age()},
                    {"fairshare", response.weight_fairshare()},
                    {"job_size", response.weight_job_size()},
                    {"partition", response.weight_partition()},
                    {"qos", response.weight_qos()}};
  out["jobs"] = nlohmann::ordered_json::array();
  for (const v1::JobPriority& job : response.jobs()) {
    nlohmann::ordered_json j;
    j["id"] = job.job_id();
    j["display_id"] = job.display_id().empty() ? std::to_string(job.job_id()) : job.display_id();
    j["user"] = job.user_name();
    j["account"] = job.account();
    j["partition"] = job.partition();
    j["qos"] = job.qos();
    j["priority"] = job.total();
    j["age"] = job.age();
    j["fairshare"] = job.fairshare();
    j["job_size"] = job.job_size();
    j["partition_factor"] = job.partition_factor();
    j["qos_factor"] = job.qos_factor();
    j["age_raw"] = job.age_raw();
    j["fairshare_raw"] = job.fairshare_raw();
    j["job_size_raw"] = job.job_size_raw();
    j["partition_raw"] = job.partition_raw();
    j["qos_raw"] = job.qos_raw();
    out["jobs"].push_back(std::move(j));
  }
  return out;
}

std::vector<std::vector<std::string>> SharesRows(const v1::SharesResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"Account", "User", "RawShares", "NormShares", "RawUsage(GPU-h)", "NormUsage", "FairShare"}};
  for (const v1::AccountShare& share : response.rows()) {
    rows.push_back({share.user().empty() ? share.account() : " " + share.account(), share.user(),
                    std::to_string(share.shares()), fmt::format("{:.6f}", share.norm_shares()),
                    fmt::format("{:.2f}", share.usage_gpu_seconds() / 3600.0),
                    fmt::format("{:.6f}", share.norm_usage()),
                    fmt::format("{:.6f}", share.factor())});
  }
  return rows;
}

nlohmann::ordered_json SharesToJson(const v1::SharesResponse& response) {
  nlohmann::ordered_json out;
  out["half_life_s"] = response.half_life_s();
  out["rows"] = nlohmann::ordered_json::array();
  for (const v1::AccountShare& share : response.rows()) {
    nlohmann::ordered_json row;
    row["account"] = share.account();
    row["user"] = share.user().empty() ? nlohmann::ordered_json(nullptr)
                                       : nlohmann::ordered_json(share.user());
    row["shares"] = share.shares();
    row["norm_shares"] = share.norm_shares();
    row["usage_gpu_seconds"] = share.usage_gpu_seconds();
    row["norm_usage"] = share.norm_usage();
    row["fairshare"] = share.factor();
    out["rows"].push_back(std::move(row));
  }
  return out;
}

std::string ExplainText(const v1::ExplainJobResponse& response, std::int64_t now_ms) {
  const v1::Job& job = response.job();
  std::string out = fmt::format("Job {} ({}, user {}) is {}", JobDisplayId(job), job.spec().name(),
                                JobUser(job), JobStateName(job.state()));
  if (!job.reason().empty() && job.reason() != "None") out += fmt::format(" ({})", job.reason());
  out += ".\n";
  if (!response.summary().empty()) out += response.summary() + "\n";
  if (!response.blockers().empty()) {
    out += "\nWhat keeps it from starting:\n";
    for (const std::string& blocker : response.blockers()) AppendItem(out, blocker);
  }
  if (job.state() == v1::JOB_PENDING) {
    const std::int64_t start =
        response.expected_start_ms() > 0 ? response.expected_start_ms() : job.expected_start_ms();
    if (start <= 0) {
      out += "\nExpected start: unknown (the backfill plan has no place for it yet)\n";
    } else if (start <= now_ms) {
      out += fmt::format("\nExpected start: {} (due now)\n", FormatTimestamp(start));
    } else {
      out += fmt::format("\nExpected start: {} (in {})\n", FormatTimestamp(start),
                         FormatElapsed((start - now_ms) / 1000));
    }
  }
  if (!response.suggestions().empty()) {
    out += "\nWhat would let it start sooner:\n";
    for (const std::string& suggestion : response.suggestions()) AppendItem(out, suggestion);
  }
  return out;
}

nlohmann::ordered_json ExplainToJson(const v1::ExplainJobResponse& response, std::int64_t now_ms) {
  nlohmann::ordered_json out;
  out["job"] = JobToJson(response.job(), now_ms);
  out["summary"] = response.summary();
  out["blockers"] = nlohmann::ordered_json::array();
  for (const std::string& blocker : response.blockers()) out["blockers"].push_back(blocker);
  const std::int64_t start = response.expected_start_ms() > 0 ? response.expected_start_ms()
                                                              : response.job().expected_start_ms();
  out["expected_start_ms"] =
      start > 0 ? nlohmann::ordered_json(start) : nlohmann::ordered_json(nullptr);
  out["suggestions"] = nlohmann::ordered_json::array();
  for (const std::string& suggestion : response.suggestions()) {
    out["suggestions"].push_back(suggestion);
  }
  return out;
}

std::string ExpectedStartCell(const v1::Job& job) {
  return job.expected_start_ms() > 0 ? FormatTimestamp(job.expected_start_ms()) : "N/A";
}

}  // namespace cohort::cli
