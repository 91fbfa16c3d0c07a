// SPDX-License-Identifier: Apache-2.0
// `scontrol`: show jobs, nodes, partitions and hostlists; hold, release,
// requeue and update jobs, as Slurm's scontrol does.
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cohort/config/cluster_config.h"
#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_time.h"
#include "commands/commands.h"
#include "commands/reservation_command.h"
#include "commands/slurm_commands.h"
#include "spec/job_ref.h"
#include "spec/job_resources.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct JobUpdateWords {
  ConnectionOptions connection;
  std::vector<std::string> words;  ///< KEY=VALUE, as scontrol update takes them
};

// scontrol update's KEY=VALUE words as an UpdateJob request. InvalidArgument
// names a word that is not one of the keys Cohort changes.
absl::StatusOr<v1::UpdateJobRequest> ParseUpdate(const std::vector<std::string>& words) {
  v1::UpdateJobRequest request;
  for (const std::string& word : words) {
    const std::size_t equals = word.find('=');
    const std::string key = word.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : word.substr(equals + 1);
    if (equals == std::string::npos || value.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("update: \"{}\" is not KEY=VALUE; write JobId=12 TimeLimit=1:00:00", word));
    }
    if (EqualsIgnoreCase(key, "JobId") || EqualsIgnoreCase(key, "Job")) {
      request.set_job_ref(value);
    } else if (EqualsIgnoreCase(key, "TimeLimit")) {
      absl::StatusOr<std::chrono::seconds> limit = ParseSlurmTime(value);
      if (!limit.ok()) {
        return absl::InvalidArgumentError(fmt::format("TimeLimit: {}", limit.status().message()));
      }
      request.set_time_limit_s(limit->count() == 0 ? kUnlimited.count() : limit->count());
    } else if (EqualsIgnoreCase(key, "Partition")) {
      request.set_partition(value);
    } else if (EqualsIgnoreCase(key, "NumNodes") || EqualsIgnoreCase(key, "MinNodes")) {
      absl::StatusOr<NodeRange> nodes = ParseNodeRange(value);
      if (!nodes.ok()) return nodes.status();
      request.set_nodes(nodes->min);
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "update: {} cannot be changed here; Cohort changes a pending job's TimeLimit, "
          "Partition and NumNodes (cancel and submit again for anything else)",
          key));
    }
  }
  if (request.job_ref().empty()) {
    return absl::InvalidArgumentError("update: name the job with JobId=12");
  }
  if (!request.has_time_limit_s() && !request.has_partition() && !request.has_nodes()) {
    return absl::InvalidArgumentError(
        "update: nothing to change; give TimeLimit=, Partition= or NumNodes=");
  }
  return request;
}

// A word's KEY and VALUE; InvalidArgument when it is not KEY=VALUE.
absl::StatusOr<std::pair<std::string, std::string>> SplitWord(const std::string& word,
                                                              std::string_view example) {
  const std::size_t equals = word.find('=');
  if (equals == std::string::npos || equals == 0) {
    return absl::InvalidArgumentError(
        fmt::format("update: \"{}\" is not KEY=VALUE; write {}", word, example));
  }
  return std::pair{word.substr(0, equals), word.substr(equals + 1)};
}

// `update NodeName=LIST State=DRAIN|DOWN|RESUME Reason=TEXT` as an
// UpdateNode request.
absl::StatusOr<v1::UpdateNodeRequest> ParseNodeUpdate(const std::vector<std::string>& words) {
  constexpr std::string_view kExample = "NodeName=node[01-02] State=DRAIN Reason=\"bad GPU\"";
  v1::UpdateNodeRequest request;
  std::string state;
  for (const std::string& word : words) {
    absl::StatusOr<std::pair<std::string, std::string>> kv = SplitWord(word, kExample);
    if (!kv.ok()) return kv.status();
    const auto& [key, value] = *kv;
    if (EqualsIgnoreCase(key, "NodeName") || EqualsIgnoreCase(key, "NodeNames")) {
      absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(value);
      if (!names.ok())
        return absl::InvalidArgumentError(fmt::format("NodeName: {}", names.status()));
      request.set_nodes(hostlist::Compress(*names));
    } else if (EqualsIgnoreCase(key, "State")) {
      state = value;
    } else if (EqualsIgnoreCase(key, "Reason")) {
      request.set_reason(value);
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "update: {} of a node cannot be changed here; Cohort changes a node's State= (DRAIN, "
          "DOWN, RESUME) with Reason=",
          key));
    }
  }
  if (request.nodes().empty()) {
    return absl::InvalidArgumentError(fmt::format("update: name the nodes: {}", kExample));
  }
  if (EqualsIgnoreCase(state, "DRAIN")) {
    request.set_action(v1::NODE_DRAIN);
  } else if (EqualsIgnoreCase(state, "DOWN")) {
    request.set_action(v1::NODE_SET_DOWN);
  } else if (EqualsIgnoreCase(state, "RESUME") || EqualsIgnoreCase(state, "IDLE") ||
             EqualsIgnoreCase(state, "UNDRAIN")) {
    request.set_action(v1::NODE_RESUME);
  } else {
    return absl::InvalidArgumentError(
        fmt::format("State={}: say DRAIN (running jobs finish), DOWN (they stop, as if the node "
                    "were lost) or RESUME",
                    state));
  }
  if (request.action() != v1::NODE_RESUME &&
      request.reason().find_first_not_of(" \t") == std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("State={} needs Reason=\"...\" saying why (sinfo -R shows it)", state));
  }
  return request;
}

// `update PartitionName=P State=UP|DOWN|DRAIN|INACTIVE`.
absl::StatusOr<v1::UpdatePartitionRequest> ParsePartitionUpdate(
    const std::vector<std::string>& words) {
  constexpr std::string_view kExample = "PartitionName=gpu State=DOWN";
  v1::UpdatePartitionRequest request;
  for (const std::string& word : words) {
    absl::StatusOr<std::pair<std::string, std::string>> kv = SplitWord(word, kExample);
    if (!kv.ok()) return kv.status();
    const auto& [key, value] = *kv;
    if (EqualsIgnoreCase(key, "PartitionName")) {
      request.set_name(value);
    } else if (EqualsIgnoreCase(key, "State")) {
      if (!config::ParsePartitionStateName(value)) {
        return absl::InvalidArgumentError(
            fmt::format("State={}: say UP, DOWN (takes jobs, starts none), DRAIN (starts those "
                        "queued, takes no new ones) or INACTIVE",
                        value));
      }
      request.set_state(value);
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "update: {} of a partition cannot be changed here; Cohort changes its State= (the "
          "rest is cohort.conf's: edit it and run scontrol reconfigure)",
          key));
    }
  }
  if (request.name().empty() || request.state().empty()) {
    return absl::InvalidArgumentError(fmt::format("update: write {}", kExample));
  }
  return request;
}

// What `update` changes: a node, a partition, a reservation, or else a job.
enum class UpdateTarget : std::uint8_t { kJob, kNode, kPartition, kReservation };
UpdateTarget TargetOf(const std::vector<std::string>& words) {
  for (const std::string& word : words) {
    const std::string key = word.substr(0, word.find('='));
    if (EqualsIgnoreCase(key, "NodeName") || EqualsIgnoreCase(key, "NodeNames")) {
      return UpdateTarget::kNode;
    }
    if (EqualsIgnoreCase(key, "ReservationName")) return UpdateTarget::kReservation;
    if (EqualsIgnoreCase(key, "PartitionName")) return UpdateTarget::kPartition;
  }
  return UpdateTarget::kJob;
}

int Fail(const absl::Status& status) {
  std::cerr << fmt::format("scontrol: error: {}\n", status.message());
  return 1;
}

int UpdateJob(const JobUpdateWords& o) {
  if (const UpdateTarget target = TargetOf(o.words); target == UpdateTarget::kNode) {
    absl::StatusOr<v1::UpdateNodeRequest> request = ParseNodeUpdate(o.words);
    if (!request.ok()) return Fail(request.status());
    return CallController(o.connection, [&](ControllerClient& client) {
      return client.UpdateNode(*request).status();
    });
  } else if (target == UpdateTarget::kReservation) {
    return RunReservationChange(o.connection, "update", o.words);
  } else if (target == UpdateTarget::kPartition) {
    absl::StatusOr<v1::UpdatePartitionRequest> request = ParsePartitionUpdate(o.words);
    if (!request.ok()) return Fail(request.status());
    return CallController(o.connection, [&](ControllerClient& client) {
      return client.UpdatePartition(*request).status();
    });
  }
  absl::StatusOr<v1::UpdateJobRequest> request = ParseUpdate(o.words);
  if (!request.ok()) {
    std::cerr << fmt::format("scontrol: error: {}\n", request.status().message());
    return 1;
  }
  if (absl::StatusOr<JobRef> ref = ParseJobRef(request->job_ref(), "update"); !ref.ok()) {
    std::cerr << fmt::format("scontrol: error: {}\n", ref.status().message());
    return 1;
  }
  return CallController(
      o.connection, [&](ControllerClient& client) { return client.UpdateJob(*request).status(); });
}

// scontrol ping: whether the controller answers, in Slurm's words (tools
// grep for "is UP"); 1 when it does not.
int Ping(const ConnectionOptions& connection) {
  absl::StatusOr<ControllerClient> client = ControllerClient::Connect(connection);
  if (!client.ok()) return Fail(client.status());
  const absl::Status answered = client->Ping(v1::PingRequest{}).status();
  // A refusal (a user past their calls a second) is an answer too.
  const bool up =
      answered.ok() || (!absl::IsUnavailable(answered) && !absl::IsDeadlineExceeded(answered));
  std::cout << fmt::format("Slurmctld(primary) at {} is {}\n", client->Address(),
                           up ? "UP" : "DOWN");
  return up ? 0 : 1;
}

}  // namespace

void AddScontrolCommand(CLI::App& app, int& exit_code) {
  app.require_subcommand(1);
  AddScontrolShow(app, exit_code);
  AddControlCommands(app, exit_code);
  AddReconfigureCommand(app, exit_code);
  AddReservationCommands(app, exit_code);
  auto ping_connection = std::make_shared<ConnectionOptions>();
  CLI::App* ping = app.add_subcommand(
      "ping", "whether the controller answers: Slurmctld(primary) at ADDRESS is UP (or DOWN, 1)");
  AddConnectionOptions(*ping, *ping_connection, ConfigShortName::kNone);
  ping->callback([ping_connection, &exit_code] { exit_code = Ping(*ping_connection); });
  auto update = std::make_shared<JobUpdateWords>();
  CLI::App* command = app.add_subcommand(
      "update",
      "change a pending job (JobId=12 TimeLimit=2:00:00 Partition=P NumNodes=4), nodes "
      "(NodeName=LIST State=DRAIN|DOWN|RESUME Reason=TEXT) or a partition (PartitionName=P "
      "State=UP|DOWN|DRAIN|INACTIVE)");
  command
      ->add_option("KEY=VALUE", update->words,
                   "JobId=, NodeName= or PartitionName=, and what to change")
      ->required();
  AddConnectionOptions(*command, update->connection, ConfigShortName::kNone);
  command->callback([update, &exit_code] { exit_code = UpdateJob(*update); });
  app.add_flag("-d,--details,-Q,--quiet,-v,--verbose")
      ->description("accepted: the output is always the full record");
  app.footer(
      "Cohort's scontrol: show job|node|partition|hostnames|hostlist, hold, release,\n"
      "requeue, update JobId=... TimeLimit=|Partition=|NumNodes= (pending jobs),\n"
      "update NodeName=... State=DRAIN|DOWN|RESUME Reason=..., update PartitionName=...\n"
      "State=UP|DOWN|DRAIN|INACTIVE, reconfigure and ping. See docs/slurm.md.");
  // Slurm's commands exit 1 for any failure.
  app.final_callback([&exit_code] { exit_code = SlurmStatus(exit_code); });
}

}  // namespace cohort::cli
