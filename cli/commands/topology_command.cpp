// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct LiveTopologyOptions {
  ConnectionOptions connection;
  bool json = false;
};

using SwitchMap = std::map<std::string, const v1::Switch*>;

std::string Counts(const v1::Switch& s) {
  return fmt::format("{} node{} ({} free, {} used, {} unavailable)", s.node_count(),
                     s.node_count() == 1 ? "" : "s", s.idle(), s.allocated(), s.unavailable());
}

void PrintTree(const SwitchMap& switches, const v1::Switch& s, const std::string& prefix, bool last,
               bool top, int depth) {
  std::string line = top ? "" : prefix + (last ? "└── " : "├── ");
  line += fmt::format("{}  level {}, {}", s.name(), s.level(), Counts(s));
  if (!s.nodes().empty()) line += fmt::format(": {}", s.nodes());
  std::cout << line << '\n';
  if (depth > 64) return;  // a malformed answer must not recurse forever
  const std::string child_prefix = top ? "" : prefix + (last ? "    " : "│   ");
  std::vector<const v1::Switch*> children;
  for (const std::string& name : s.children()) {
    if (const auto it = switches.find(name); it != switches.end()) children.push_back(it->second);
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    PrintTree(switches, *children[i], child_prefix, i + 1 == children.size(), false, depth + 1);
  }
}

void PrintTopology(const LiveTopologyOptions& o, const v1::GetTopologyResponse& topology) {
  if (o.json) {
    nlohmann::ordered_json out;
    out["roots"] = nlohmann::ordered_json::array();
    for (const std::string& root : topology.roots()) out["roots"].push_back(root);
    out["switches"] = nlohmann::ordered_json::array();
    for (const v1::Switch& s : topology.switches()) {
      nlohmann::ordered_json children = nlohmann::ordered_json::array();
      for (const std::string& child : s.children()) children.push_back(child);
      out["switches"].push_back({{"name", s.name()},
                                 {"level", s.level()},
                                 {"parent", s.parent()},
                                 {"children", children},
                                 {"nodes", s.nodes()},
                                 {"node_count", s.node_count()},
                                 {"free", s.idle()},
                                 {"used", s.allocated()},
                                 {"unavailable", s.unavailable()}});
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  SwitchMap switches;
  for (const v1::Switch& s : topology.switches()) switches[s.name()] = &s;
  bool first = true;
  for (const std::string& root : topology.roots()) {
    const auto it = switches.find(root);
    if (it == switches.end()) continue;
    if (!first) std::cout << '\n';
    first = false;
    PrintTree(switches, *it->second, "", true, true, 0);
  }
  if (first) std::cout << "no switches: the controller reports no topology\n";
}

int ShowLive(const LiveTopologyOptions& o) {
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::GetTopologyResponse> response = client.GetTopology(v1::GetTopologyRequest());
    if (!response.ok()) return response.status();
    PrintTopology(o, *response);
    return absl::OkStatus();
  });
}

}  // namespace

void AddLiveTopology(CLI::App& topology, int& exit_code) {
  auto o = std::make_shared<LiveTopologyOptions>();
  topology.add_flag("--json", o->json,
                    "print {\"roots\": [...], \"switches\": [...]} as JSON (the live tree)");
  AddConnectionOptions(topology, o->connection);
  CLI::App* self = &topology;
  topology.callback([o, self, &exit_code] {
    if (!self->get_subcommands().empty()) return;  // `topology show` ran instead
    exit_code = ShowLive(*o);
  });
}

}  // namespace cohort::cli
