// SPDX-License-Identifier: Apache-2.0
#include "format/policy_format.h"

#include <string_view>

#include <fmt/format.h>

#include "format/job_format.h"

namespace cohort::cli {
namespace {

std::string Weighted(double value) { return fmt::format("{:.0f}", value); }
std::string Normalised(double value) { return fmt::format("{:.4f}", value); }

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
    // As Slurm's sshare: an account indented by its depth, a user's line
    // one further under its account.
    const int depth = share.user().empty() ? share.depth() : std::max(share.depth(), 1);
    const std::string indent(static_cast<std::size_t>(std::max(depth, 0)), ' ');
    rows.push_back({indent + share.account(), share.user(), std::to_string(share.shares()),
                    fmt::format("{:.6f}", share.norm_shares()),
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
    row["parent"] = share.parent();
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

std::string ExpectedStartCell(const v1::Job& job) {
  return job.expected_start_ms() > 0 ? FormatTimestamp(job.expected_start_ms()) : "N/A";
}

}  // namespace cohort::cli
