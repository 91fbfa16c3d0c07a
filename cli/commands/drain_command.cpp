// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "commands/commands.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct UpdateOptions {
  ConnectionOptions connection;
  std::vector<std::string> nodes;
  std::string reason;
};

int Update(const UpdateOptions& o, v1::NodeAction action, std::string_view verb) {
  // One hostlist of every name given, checked here so that a typo is
  // reported before anything changes.
  std::vector<std::string> names;
  for (const std::string& list : o.nodes) {
    absl::StatusOr<std::vector<std::string>> expanded = hostlist::Expand(list);
    if (!expanded.ok()) {
      std::cerr << fmt::format("cohort: {}: {}\n", verb, expanded.status());
      return 2;
    }
    names.insert(names.end(), expanded->begin(), expanded->end());
  }
  if (action != v1::NODE_RESUME && o.reason.find_first_not_of(" \t") == std::string::npos) {
    std::cerr << fmt::format(
        "cohort: {} needs --reason TEXT saying why (cohort nodes -N and sinfo -R show it), such "
        "as --reason \"bad GPU 3\"\n",
        verb);
    return 2;
  }
  v1::UpdateNodeRequest request;
  request.set_nodes(hostlist::Compress(names));
  request.set_action(action);
  request.set_reason(o.reason);
  return CallController(
      o.connection, [&](ControllerClient& client) { return client.UpdateNode(request).status(); });
}

}  // namespace

void AddDrainCommands(CLI::App& app, int& exit_code) {
  auto drain_options = std::make_shared<UpdateOptions>();
  CLI::App* drain = app.add_subcommand(
      "drain", "keep new jobs off nodes; running jobs finish (cohort drain NODES --reason TEXT)");
  drain->add_option("NODES", drain_options->nodes, "node names or hostlists, such as gpu[001-004]")
      ->required();
  drain->add_option("-r,--reason", drain_options->reason,
                    "why, shown by cohort nodes -N (required)");
  AddConnectionOptions(*drain, drain_options->connection);
  drain->callback(
      [drain_options, &exit_code] { exit_code = Update(*drain_options, v1::NODE_DRAIN, "drain"); });

  auto down_options = std::make_shared<UpdateOptions>();
  CLI::App* down = app.add_subcommand(
      "down",
      "take nodes out now: their jobs stop there as if the nodes were lost (requeued, repaired "
      "from spares, or failed), and nothing runs there until resumed (cohort down NODES --reason "
      "TEXT)");
  down->add_option("NODES", down_options->nodes, "node names or hostlists, such as gpu[001-004]")
      ->required();
  down->add_option("-r,--reason", down_options->reason,
                   "why, shown by cohort nodes -N and sinfo -R (required)");
  AddConnectionOptions(*down, down_options->connection);
  down->callback(
      [down_options, &exit_code] { exit_code = Update(*down_options, v1::NODE_SET_DOWN, "down"); });

  auto resume_options = std::make_shared<UpdateOptions>();
  CLI::App* resume = app.add_subcommand(
      "resume", "let drained or down nodes take jobs again (cohort resume NODES)");
  resume
      ->add_option("NODES", resume_options->nodes, "node names or hostlists, such as gpu[001-004]")
      ->required();
  AddConnectionOptions(*resume, resume_options->connection);
  resume->callback([resume_options, &exit_code] {
    exit_code = Update(*resume_options, v1::NODE_RESUME, "resume");
  });
}

}  // namespace cohort::cli
