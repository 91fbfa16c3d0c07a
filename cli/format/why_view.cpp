// SPDX-License-Identifier: Apache-2.0
#include "format/why_view.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "cohort/engine/job.h"
#include "format/job_format.h"

namespace cohort::cli {
namespace {

std::string_view Plural(std::int64_t n) { return n == 1 ? "" : "s"; }

// A list item, the item's later lines indented under its first word.
void AppendItem(std::string& out, const std::string& text) {
  std::string indented;
  for (const char c : text) {
    indented += c;
    if (c == '\n') indented += "    ";
  }
  out += fmt::format("  - {}\n", indented);
}

// The jobs ahead, the resources it lacks and the leaves closest to holding it.
void WaitBlockers(const v1::WaitFacts& wait, WhyWords& words) {
  if (wait.ahead_count() > 0) {
    std::vector<std::string> ahead;
    for (const v1::JobAhead& a : wait.ahead()) {
      ahead.push_back(fmt::format("{} (priority {}, {} node{})", a.display_id(), a.priority(),
                                  a.nodes(), Plural(a.nodes())));
    }
    const int n = wait.ahead_count();
    words.blockers.push_back(
        fmt::format("{} job{} of higher priority wait{} ahead of it in partition {}: {}{}", n,
                    Plural(n), n == 1 ? "s" : "", wait.partition(), fmt::join(ahead, ", "),
                    n > wait.ahead_size() ? ", …" : ""));
  }
  if (!wait.shortfall().empty()) {
    words.blockers.push_back(fmt::format("resources: {}", wait.shortfall()));
  }
  if (!wait.closest_leaves().empty()) {
    std::vector<std::string> leaves;
    for (const v1::LeafFit& leaf : wait.closest_leaves()) {
      leaves.push_back(fmt::format("{} has {} of {} nodes free enough", leaf.name(), leaf.fitting(),
                                   leaf.nodes()));
    }
    words.blockers.push_back(fmt::format("closest switches for its {} node{}: {}", wait.nodes(),
                                         Plural(wait.nodes()), fmt::join(leaves, "; ")));
  }
  if (!wait.preempting().empty()) words.blockers.push_back(wait.preempting());
}

// The changes that would start it now, as the options that make them.
void SoonerSuggestions(const v1::Counterfactuals& sooner, bool has_time_limit, WhyWords& words) {
  if (sooner.fewer_nodes() > 0) {
    words.suggestions.push_back(fmt::format("with -N {} it could start now", sooner.fewer_nodes()));
  }
  if (sooner.without_switches() > 0) {
    words.suggestions.push_back(
        fmt::format("without --switches={} it could start now, spread over more leaf switches",
                    sooner.without_switches()));
  }
  for (const std::string& p : sooner.partitions()) {
    words.suggestions.push_back(fmt::format("partition {} could start it now (-p {})", p, p));
  }
  if (words.suggestions.empty() && has_time_limit) {
    words.suggestions.push_back("a shorter --time lets it backfill into gaps before reservations");
  }
}

// A job that waits for resources or priority.
void WaitInWords(const v1::ExplainJobResponse& response, const std::string& id, bool priority,
                 WhyWords& words) {
  const v1::WaitFacts& wait = response.wait();
  WaitBlockers(wait, words);
  SoonerSuggestions(response.sooner(), wait.has_time_limit(), words);
  const std::string_view what = priority ? "higher-priority jobs" : "resources";
  const std::int64_t start = response.expected_start_ms();
  if (start != 0) {
    const std::int64_t minutes = (start - response.explained_at_ms()) / 60'000;
    words.summary = fmt::format(
        "Job {} waits for {}; the backfill plan starts it by {} (in about {} minute{}).", id, what,
        FormatTimestamp(start), std::max<std::int64_t>(minutes, 0), Plural(minutes));
    return;
  }
  words.summary =
      fmt::format("Job {} waits for {}; no start time is known yet ({}).", id, what,
                  wait.beyond_backfill_depth()
                      ? "it is beyond the backfill depth or the jobs in its way have no time limit"
                      : "the jobs in its way have no time limit");
}

// A job that is not pending: where it runs, or how it ended; a job being
// preempted is told how to stop at once.
WhyWords NotPendingInWords(const v1::Job& job, const std::string& id) {
  WhyWords words;
  words.summary =
      job.state() == v1::JOB_RUNNING
          ? fmt::format("Job {} is running on {}.", id, job.nodes())
          : fmt::format("Job {} is {}: {}.", id, JobStateName(job.state()), job.reason());
  if (job.preempt_deadline_ms() != 0) {
    words.blockers.push_back(job.reason_detail());
    words.suggestions.push_back(
        fmt::format("save a checkpoint and run cohort checkpoint-done {} to stop at once", id));
  }
  return words;
}

}  // namespace

WhyWords WhyInWords(const v1::ExplainJobResponse& response) {
  const v1::Job& job = response.job();
  const std::string id = JobDisplayId(job);
  if (job.state() != v1::JOB_PENDING) return NotPendingInWords(job, id);
  WhyWords words;
  const PendingReason reason =
      ParsePendingReason(response.pending_reason()).value_or(PendingReason::kNone);
  const std::string& detail = job.reason_detail();
  switch (reason) {
    case PendingReason::kJobHeldUser:
    case PendingReason::kJobHeldAdmin:
      words.summary = fmt::format("Job {} is held and will not start until it is released.", id);
      words.blockers.push_back(detail);
      if (reason == PendingReason::kJobHeldUser) {
        words.suggestions.push_back(fmt::format("cohort release {}", id));
      }
      return words;
    case PendingReason::kBeginTime:
      words.summary = fmt::format("Job {} waits for the time it asked to begin at.", id);
      words.blockers.push_back(detail);
      words.suggestions.push_back(
          "it is tried once that time comes; to start it sooner, cancel it and submit again "
          "without --begin");
      return words;
    case PendingReason::kPartitionDown:
    case PendingReason::kPartitionInactive:
      words.summary =
          fmt::format("Job {}'s partition {} starts no jobs now.", id, job.spec().partition());
      words.blockers.push_back(detail);
      words.suggestions.push_back(
          "it starts once an operator sets the partition UP; to run elsewhere, move it to another "
          "partition (scontrol update JobId=ID Partition=P)");
      return words;
    case PendingReason::kDependency:
      words.summary = fmt::format("Job {} waits for its dependency.", id);
      words.blockers.push_back(detail);
      return words;
    case PendingReason::kDependencyNeverSatisfied:
      words.summary =
          fmt::format("Job {}'s dependency can never be satisfied; it will not start.", id);
      words.blockers.push_back(detail);
      words.suggestions.push_back(fmt::format(
          "cancel it (cohort cancel {}) and submit again with a dependency that can hold", id));
      return words;
    case PendingReason::kQosMaxJobsPerUser:
    case PendingReason::kQosMaxGpusPerUser:
    case PendingReason::kQosMaxGpusPerAccount:
    case PendingReason::kJobArrayTaskLimit:
      words.summary = fmt::format("Job {} waits for a limit ({}).", id, PendingReasonName(reason));
      words.blockers.push_back(detail);
      words.suggestions.push_back(reason == PendingReason::kJobArrayTaskLimit
                                      ? "the next task starts when a running one ends"
                                      : "it starts when your running jobs under this limit end, "
                                        "or with another --qos");
      return words;
    case PendingReason::kAssocGrpGres:
    case PendingReason::kAssocGrpCpu:
    case PendingReason::kAssocGrpNode:
    case PendingReason::kAssocGrpJobs:
    case PendingReason::kAssocMaxJobs:
    case PendingReason::kQosGrpGres:
    case PendingReason::kQosGrpCpu:
    case PendingReason::kQosGrpNode:
    case PendingReason::kQosGrpJobs: {
      const bool qos = PendingReasonName(reason).starts_with("QOS");
      words.summary = fmt::format("Job {} waits for its {}'s limit ({}).", id,
                                  qos ? "QOS" : "account", PendingReasonName(reason));
      words.blockers.push_back(detail);
      words.suggestions.push_back(
          qos ? "it starts when running jobs of this QOS end; sacctmgr show qos lists the "
                "limits; or submit with another --qos"
              : "it starts when running jobs under this limit end; sacctmgr show assoc lists the "
                "limits; or submit charging another account (-A)");
      return words;
    }
    case PendingReason::kQosGrpGresMinutes:
    case PendingReason::kQosGrpCpuMinutes:
    case PendingReason::kAssocGrpGresMinutes:
    case PendingReason::kAssocGrpCpuMinutes:
      words.summary = fmt::format("Job {} waits: its {}'s budget would be overspent ({}).", id,
                                  PendingReasonName(reason).starts_with("QOS") ? "QOS" : "account",
                                  PendingReasonName(reason));
      words.blockers.push_back(detail);
      words.suggestions.push_back(
          "ask for less time if the detail says it then fits, charge another account or use "
          "another QOS, or ask an operator to raise GrpTRESMins (sacctmgr modify account|qos)");
      return words;
    case PendingReason::kReservation:
      words.summary = fmt::format("Job {} waits for its reservation.", id);
      words.blockers.push_back(detail);
      words.suggestions.push_back(
          "it starts once the reservation is active and the job fits inside it; scontrol show "
          "reservation shows its window");
      return words;
    case PendingReason::kReservedForMaintenance:
      words.summary =
          fmt::format("Job {} would run into a maintenance reservation on the nodes it needs.", id);
      words.blockers.push_back(detail);
      words.suggestions.push_back(
          "ask for less time if the detail says it then starts (scontrol update JobId=ID "
          "TimeLimit=T), or wait until the maintenance ends");
      return words;
    case PendingReason::kNone:
    case PendingReason::kResources:
    case PendingReason::kPriority:
    case PendingReason::kReqNodeNotAvail:
    case PendingReason::kRequeued:
      WaitInWords(response, id, reason == PendingReason::kPriority, words);
      return words;
  }
  return words;
}

std::string ExplainText(const v1::ExplainJobResponse& response, std::int64_t now_ms) {
  const v1::Job& job = response.job();
  const WhyWords words = WhyInWords(response);
  std::string out = fmt::format("Job {} ({}, user {}) is {}", JobDisplayId(job), job.spec().name(),
                                JobUser(job), JobStateName(job.state()));
  if (!job.reason().empty() && job.reason() != "None") out += fmt::format(" ({})", job.reason());
  out += ".\n";
  if (!words.summary.empty()) out += words.summary + "\n";
  if (!words.blockers.empty()) {
    out += "\nWhat keeps it from starting:\n";
    for (const std::string& blocker : words.blockers) AppendItem(out, blocker);
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
    if (!job.image_status().empty()) {
      out += fmt::format("Container image: {}\n", job.image_status());
    }
  }
  if (!words.suggestions.empty()) {
    out += "\nWhat would let it start sooner:\n";
    for (const std::string& suggestion : words.suggestions) AppendItem(out, suggestion);
  }
  if (!job.repairs().empty() || !job.spare_nodes().empty()) {
    out += fmt::format("\nGang repairs (spares held now: {}):\n",
                       job.spare_nodes().empty() ? std::string("none") : job.spare_nodes());
    if (job.repairs().empty()) AppendItem(out, "none yet");
    for (const v1::Repair& r : job.repairs()) {
      AppendItem(out,
                 fmt::format("{}: {} replaced by {} (node rank{} {}); started {}; {}",
                             FormatTimestamp(r.time_ms()), fmt::join(r.lost(), ","),
                             fmt::join(r.replacement(), ","), r.node_ranks_size() == 1 ? "" : "s",
                             fmt::join(r.node_ranks(), ","), r.restarted(), r.reason()));
    }
  }
  return out;
}

nlohmann::ordered_json ExplainToJson(const v1::ExplainJobResponse& response, std::int64_t now_ms) {
  const WhyWords words = WhyInWords(response);
  nlohmann::ordered_json out;
  out["job"] = JobToJson(response.job(), now_ms);
  out["summary"] = words.summary;
  out["blockers"] = words.blockers;
  const std::int64_t start = response.expected_start_ms() > 0 ? response.expected_start_ms()
                                                              : response.job().expected_start_ms();
  out["expected_start_ms"] =
      start > 0 ? nlohmann::ordered_json(start) : nlohmann::ordered_json(nullptr);
  out["suggestions"] = words.suggestions;
  out["pending_reason"] = response.pending_reason().empty()
                              ? nlohmann::ordered_json(nullptr)
                              : nlohmann::ordered_json(response.pending_reason());
  const v1::WaitFacts& wait = response.wait();
  nlohmann::ordered_json& w = out["wait"];
  w["partition"] = wait.partition();
  w["nodes"] = wait.nodes();
  w["ahead_count"] = wait.ahead_count();
  w["ahead"] = nlohmann::ordered_json::array();
  for (const v1::JobAhead& a : wait.ahead()) {
    w["ahead"].push_back(
        {{"display_id", a.display_id()}, {"priority", a.priority()}, {"nodes", a.nodes()}});
  }
  w["shortfall"] = wait.shortfall();
  w["closest_leaves"] = nlohmann::ordered_json::array();
  for (const v1::LeafFit& leaf : wait.closest_leaves()) {
    w["closest_leaves"].push_back(
        {{"name", leaf.name()}, {"fitting", leaf.fitting()}, {"nodes", leaf.nodes()}});
  }
  w["preempting"] = wait.preempting();
  w["beyond_backfill_depth"] = wait.beyond_backfill_depth();
  w["has_time_limit"] = wait.has_time_limit();
  const v1::Counterfactuals& sooner = response.sooner();
  nlohmann::ordered_json& s = out["sooner"];
  s["fewer_nodes"] = sooner.fewer_nodes();
  s["without_switches"] = sooner.without_switches();
  s["partitions"] = nlohmann::ordered_json::array();
  for (const std::string& p : sooner.partitions()) s["partitions"].push_back(p);
  return out;
}

}  // namespace cohort::cli
