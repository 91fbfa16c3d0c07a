// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/hostlist.h"
#include "commands.h"
#include "controller_client.h"
#include "job_format.h"

namespace cohort::cli {
namespace {

struct NodesOptions {
  ConnectionOptions connection;
  bool long_listing = false;
  std::string partition;
  bool json = false;
};

// Per partition and state: how many nodes and which (sinfo's summary).
struct Group {
  std::string partition;
  v1::NodeState state;
  std::vector<std::string> nodes;
};

std::vector<Group> Summarise(const std::vector<v1::Node>& nodes, const std::string& only) {
  std::vector<std::string> partitions;  // in order of first appearance
  std::map<std::pair<std::string, int>, std::vector<std::string>> members;
  for (const v1::Node& node : nodes) {
    std::vector<std::string> of(node.partitions().begin(), node.partitions().end());
    if (of.empty()) of.emplace_back("-");
    for (const std::string& p : of) {
      if (!only.empty() && p != only) continue;
      if (std::find(partitions.begin(), partitions.end(), p) == partitions.end()) {
        partitions.push_back(p);
      }
      members[{p, node.state()}].push_back(node.name());
    }
  }
  std::vector<Group> groups;
  for (const std::string& p : partitions) {
    for (const auto& [key, names] : members) {
      if (key.first == p) groups.push_back({p, static_cast<v1::NodeState>(key.second), names});
    }
  }
  return groups;
}

absl::Status PrintNodes(const NodesOptions& o, const v1::ListNodesResponse& response) {
  std::vector<v1::Node> nodes;
  for (const v1::Node& node : response.nodes()) {
    if (o.partition.empty() || std::find(node.partitions().begin(), node.partitions().end(),
                                         o.partition) != node.partitions().end()) {
      nodes.push_back(node);
    }
  }
  if (!o.partition.empty() && nodes.empty()) {
    return absl::NotFoundError(
        fmt::format("nodes: no node is in a partition {}; see cohort nodes", o.partition));
  }
  const std::vector<Group> groups = Summarise(nodes, o.partition);

  if (o.json) {
    nlohmann::ordered_json out;
    out["partitions"] = nlohmann::ordered_json::array();
    for (const Group& g : groups) {
      out["partitions"].push_back({{"partition", g.partition},
                                   {"state", NodeStateName(g.state)},
                                   {"count", g.nodes.size()},
                                   {"nodes", hostlist::Compress(g.nodes)}});
    }
    out["nodes"] = nlohmann::ordered_json::array();
    for (const v1::Node& node : nodes) out["nodes"].push_back(NodeToJson(node));
    std::cout << out.dump(2) << '\n';
    return absl::OkStatus();
  }

  std::vector<std::vector<std::string>> rows;
  if (o.long_listing) {
    rows.push_back({"NODE", "PARTITIONS", "STATE", "CPUS(A/T)", "MEMORY_MB(A/T)", "GPUS(A/T)",
                    "LEAF", "BLOCK", "FEATURES", "JOBS", "REASON"});
    for (const v1::Node& node : nodes) {
      rows.push_back(
          {node.name(), fmt::format("{}", fmt::join(node.partitions(), ",")),
           NodeStateLower(node.state()), fmt::format("{}/{}", node.cpus_allocated(), node.cpus()),
           fmt::format("{}/{}", node.memory_allocated_mb(), node.memory_mb()),
           fmt::format("{}/{}", node.gpus_allocated(), node.gpus()),
           node.leaf().empty() ? "-" : node.leaf(), node.block().empty() ? "-" : node.block(),
           node.features().empty() ? "-" : fmt::format("{}", fmt::join(node.features(), ",")),
           node.jobs().empty() ? "-" : fmt::format("{}", fmt::join(node.jobs(), ",")),
           node.reason().empty() ? "-" : node.reason()});
    }
  } else {
    rows.push_back({"PARTITION", "NODES", "STATE", "NODELIST"});
    for (const Group& g : groups) {
      rows.push_back({g.partition, std::to_string(g.nodes.size()), NodeStateLower(g.state),
                      hostlist::Compress(g.nodes)});
    }
  }
  PrintColumns(rows, std::cout);
  return absl::OkStatus();
}

int Nodes(const NodesOptions& o) {
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ListNodesResponse> response = client.ListNodes(v1::ListNodesRequest());
    if (!response.ok()) return response.status();
    return PrintNodes(o, *response);
  });
}

}  // namespace

void AddNodesCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<NodesOptions>();
  CLI::App* nodes = app.add_subcommand(
      "nodes", "list the nodes: per partition, how many are in each state and which (like sinfo)");
  nodes->add_flag("-N,--long", o->long_listing,
                  "one line per node: state, CPUs, memory and GPUs allocated/total, leaf switch, "
                  "block, features, jobs and reason");
  nodes->add_option("-p,--partition", o->partition, "only the nodes of this partition");
  nodes->add_flag("--json", o->json,
                  "print {\"partitions\": [per partition and state], \"nodes\": [every node]} as "
                  "JSON");
  AddConnectionOptions(*nodes, o->connection);
  nodes->callback([o, &exit_code] { exit_code = Nodes(*o); });
}

}  // namespace cohort::cli
