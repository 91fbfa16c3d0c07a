// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "commands/commands.h"
#include "commands/reservation_command.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/percent_format.h"
#include "transport/controller_client.h"

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
    const std::int64_t now = NowMs();
    rows.push_back({"NODE", "PARTITIONS", "STATE", "CPUS(A/T)", "MEMORY_MB(A/T)", "GPUS(A/T)",
                    "LEAF", "BLOCK", "FEATURES", "JOBS", "REASON"});
    for (const v1::Node& node : nodes) {
      rows.push_back(
          {node.name(), fmt::format("{}", fmt::join(node.partitions(), ",")), NodeStateText(node),
           fmt::format("{}/{}", node.cpus_allocated(), node.cpus()),
           fmt::format("{}/{}", node.memory_allocated_mb(), node.memory_mb()),
           fmt::format("{}/{}", node.gpus_allocated(), node.gpus()),
           node.leaf().empty() ? "-" : node.leaf(), node.block().empty() ? "-" : node.block(),
           node.features().empty() ? "-" : fmt::format("{}", fmt::join(node.features(), ",")),
           node.jobs().empty() ? "-" : fmt::format("{}", fmt::join(node.jobs(), ",")),
           NodeReason(node, now).empty() ? "-" : NodeReason(node, now)});
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

namespace {

// What an active reservation makes of its nodes in sinfo's state, as
// Slurm's: "maint" for a node of a MAINT reservation that is not down or
// drained, "resv" for an idle node of another; none otherwise.
enum class Reserved : std::uint8_t { kNone, kMaint, kResv };

// sinfo: one row per partition and state (per node with -N).
struct SinfoRow {
  const v1::Partition* partition = nullptr;
  v1::NodeState state = v1::NODE_STATE_UNSPECIFIED;
  std::vector<const v1::Node*> nodes;
  Reserved reserved = Reserved::kNone;
};

// The active reservations' nodes by name: kMaint where a MAINT one holds
// the node, else kResv.
using ReservedNodes = std::map<std::string, Reserved, std::less<>>;
ReservedNodes ReservedBy(const v1::ListReservationsResponse& list) {
  ReservedNodes reserved;
  for (const v1::Reservation& r : list.reservations()) {
    if (!r.active()) continue;
    const bool maint = std::ranges::any_of(CommaList(r.flags()), [](std::string_view flag) {
      return EqualsIgnoreCase(flag, "MAINT");
    });
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(r.nodes());
    if (!names.ok()) continue;
    for (std::string& name : *names) {
      Reserved& kind = reserved[std::move(name)];
      if (maint || kind == Reserved::kNone) kind = maint ? Reserved::kMaint : Reserved::kResv;
    }
  }
  return reserved;
}

// How `node` shows in sinfo's state, given the reservations.
Reserved ReservedState(const v1::Node& node, const ReservedNodes& reserved) {
  const auto it = reserved.find(node.name());
  if (it == reserved.end() || node.state() == v1::NODE_DOWN || node.state() == v1::NODE_DRAINED ||
      node.state() == v1::NODE_DRAINING) {
    return Reserved::kNone;
  }
  if (it->second == Reserved::kMaint) return Reserved::kMaint;
  return node.state() == v1::NODE_IDLE ? Reserved::kResv : Reserved::kNone;
}

struct SinfoField {
  char letter;
  std::string_view header;
  std::string_view meaning;
  std::string (*value)(const SinfoRow& row);
};

// `*` after a state whose nodes are not responding, as sinfo writes it
// (rows group nodes by that too).
std::string NotResponding(const SinfoRow& row) {
  return !row.nodes.empty() && row.nodes.front()->not_responding() ? "*" : "";
}

std::string CompactState(v1::NodeState state, Reserved reserved = Reserved::kNone) {
  if (reserved == Reserved::kMaint) return "maint";
  if (reserved == Reserved::kResv) return "resv";
  switch (state) {
    case v1::NODE_IDLE:
      return "idle";
    case v1::NODE_MIXED:
      return "mix";
    case v1::NODE_ALLOCATED:
      return "alloc";
    case v1::NODE_DRAINING:
      return "drng";
    case v1::NODE_DRAINED:
      return "drain";
    case v1::NODE_DOWN:
      return "down";
    default:
      return "unk";
  }
}

// A per-node number of the row's nodes: one value, or the smallest with +.
template <typename Get>
std::string PerNode(const SinfoRow& row, Get get) {
  if (row.nodes.empty()) return "0";
  auto low = get(*row.nodes.front());
  bool varies = false;
  for (const v1::Node* node : row.nodes) {
    varies = varies || get(*node) != low;
    low = std::min(low, get(*node));
  }
  return fmt::format("{}{}", low, varies ? "+" : "");
}

std::string Names(const SinfoRow& row) {
  std::vector<std::string> names;
  for (const v1::Node* node : row.nodes) names.push_back(node->name());
  return hostlist::Compress(names);
}

// A partition's state as sinfo's AVAIL column: up, down, drain, inact.
std::string Availability(const v1::Partition& p) {
  if (p.state().empty() || EqualsIgnoreCase(p.state(), "UP")) return "up";
  if (EqualsIgnoreCase(p.state(), "INACTIVE")) return "inact";
  std::string lower = p.state();
  std::ranges::transform(lower, lower.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

std::string LimitText(std::int64_t seconds) {
  return seconds == 0 ? std::string("infinite") : FormatSlurmLimit(seconds);
}

constexpr SinfoField kSinfoFields[] = {
    {'P', "PARTITION", "partition (* marks the default)",
     [](const SinfoRow& r) {
       return r.partition->name() + (r.partition->is_default() ? "*" : "");
     }},
    {'R', "PARTITION", "partition", [](const SinfoRow& r) { return r.partition->name(); }},
    {'a', "AVAIL", "the partition's state (up, down, drain, inact)",
     [](const SinfoRow& r) { return Availability(*r.partition); }},
    {'l', "TIMELIMIT", "time limit",
     [](const SinfoRow& r) { return LimitText(r.partition->max_time_s()); }},
    {'L', "DEFAULTTIME", "default time limit",
     [](const SinfoRow& r) {
       return r.partition->default_time_s() > 0 ? FormatSlurmLimit(r.partition->default_time_s())
                                                : std::string("n/a");
     }},
    {'D', "NODES", "node count", [](const SinfoRow& r) { return std::to_string(r.nodes.size()); }},
    {'t', "STATE", "state, short",
     [](const SinfoRow& r) { return CompactState(r.state, r.reserved) + NotResponding(r); }},
    {'T', "STATE", "state",
     [](const SinfoRow& r) {
       return (r.reserved == Reserved::kMaint  ? std::string("maint")
               : r.reserved == Reserved::kResv ? std::string("reserved")
                                               : NodeStateLower(r.state)) +
              NotResponding(r);
     }},
    {'N', "NODELIST", "nodes", [](const SinfoRow& r) { return Names(r); }},
    {'n', "HOSTNAMES", "nodes", [](const SinfoRow& r) { return Names(r); }},
    {'c', "CPUS", "CPUs per node",
     [](const SinfoRow& r) { return PerNode(r, [](const v1::Node& n) { return n.cpus(); }); }},
    {'m', "MEMORY", "memory per node (MB)",
     [](const SinfoRow& r) { return PerNode(r, [](const v1::Node& n) { return n.memory_mb(); }); }},
    {'G', "GRES", "GPUs per node (gpu:TYPE:N)",
     [](const SinfoRow& r) {
       if (r.nodes.empty() || r.nodes.front()->gpus() == 0) return std::string("(null)");
       const v1::Node& n = *r.nodes.front();
       return n.gpu_type().empty() ? fmt::format("gpu:{}", n.gpus())
                                   : fmt::format("gpu:{}:{}", n.gpu_type(), n.gpus());
     }},
    {'f', "AVAIL_FEATURES", "features",
     [](const SinfoRow& r) {
       if (r.nodes.empty() || r.nodes.front()->features().empty()) return std::string("(null)");
       return fmt::format("{}", fmt::join(r.nodes.front()->features(), ","));
     }},
    {'F', "NODES(A/I/O/T)", "nodes allocated/idle/other/total",
     [](const SinfoRow& r) {
       int allocated = 0, idle = 0, other = 0;
       for (const v1::Node* n : r.nodes) {
         if (n->state() == v1::NODE_ALLOCATED || n->state() == v1::NODE_MIXED) {
           ++allocated;
         } else if (n->state() == v1::NODE_IDLE) {
           ++idle;
         } else {
           ++other;
         }
       }
       return fmt::format("{}/{}/{}/{}", allocated, idle, other, r.nodes.size());
     }},
    {'C', "CPUS(A/I/O/T)", "CPUs allocated/idle/other/total",
     [](const SinfoRow& r) {
       int allocated = 0, idle = 0, other = 0, total = 0;
       for (const v1::Node* n : r.nodes) {
         total += n->cpus();
         const bool usable = n->state() != v1::NODE_DOWN && n->state() != v1::NODE_DRAINED;
         allocated += n->cpus_allocated();
         if (usable) {
           idle += n->cpus() - n->cpus_allocated();
         } else {
           other += n->cpus() - n->cpus_allocated();
         }
       }
       return fmt::format("{}/{}/{}/{}", allocated, idle, other, total);
     }},
    {'E', "REASON", "why a node is drained or down",
     [](const SinfoRow& r) {
       return r.nodes.empty() || r.nodes.front()->reason().empty() ? std::string("none")
                                                                   : r.nodes.front()->reason();
     }},
    {'u', "USER", "who gave the reason (cohort: the controller)",
     [](const SinfoRow& r) {
       return r.nodes.empty() || r.nodes.front()->reason().empty() ? std::string("Unknown")
                                                                   : ReasonSetter(*r.nodes.front());
     }},
    {'H', "TIMESTAMP", "when the reason was given",
     [](const SinfoRow& r) {
       return r.nodes.empty() || r.nodes.front()->reason_time_ms() <= 0
                  ? std::string("Unknown")
                  : FormatTimestamp(r.nodes.front()->reason_time_ms());
     }},
};

struct SinfoOptions {
  ConnectionOptions connection;
  std::string format;
  std::string partitions;
  std::string states;
  std::string nodes;
  bool no_header = false;
  bool node_oriented = false;
  bool long_listing = false;
  bool reasons = false;       ///< -R: the nodes out of service, by reason
  bool summarize = false;     ///< -s: one row a partition, nodes counted by state
  bool reservations = false;  ///< -T: the reservations
};

// Whether `text` (a comma list, empty: any) names `state`, by sinfo's long
// or short name (maint, resv and reserved name what reservations make of
// it).
bool StateWanted(const std::string& text, v1::NodeState state, Reserved reserved) {
  const std::vector<std::string_view> words = CommaList(text);
  return words.empty() || std::ranges::any_of(words, [&](std::string_view word) {
           return EqualsIgnoreCase(word, NodeStateLower(state)) ||
                  EqualsIgnoreCase(word, CompactState(state)) ||
                  (reserved != Reserved::kNone &&
                   (EqualsIgnoreCase(word, CompactState(state, reserved)) ||
                    (reserved == Reserved::kResv && EqualsIgnoreCase(word, "reserved"))));
         });
}

// The key that groups a node with others of its row: its state and every
// field of the format but the lists and counts (%N %n %D %C).
std::string GroupKey(const SinfoRow& alone, const std::vector<FormatSegment<SinfoField>>& segments,
                     bool summarize) {
  // -s: the states are counted, not grouped (%F).
  std::string key;
  if (!summarize) {
    key = NodeStateText(*alone.nodes.front());
    key += static_cast<char>('0' + static_cast<int>(alone.reserved));
  }
  for (const FormatSegment<SinfoField>& s : segments) {
    if (s.field != nullptr &&
        std::string_view("NnDCF").find(s.field->letter) == std::string_view::npos &&
        !(summarize && (s.field->letter == 't' || s.field->letter == 'T'))) {
      key += '\0' + s.field->value(alone);
    }
  }
  return key;
}

// Rows by their group key, in order of their first node.
using SinfoGroups = std::vector<std::pair<std::string, SinfoRow>>;

// Adds a node's row to the group it looks the same as, or as a new group.
void AddToGroup(SinfoGroups& groups, SinfoRow alone,
                const std::vector<FormatSegment<SinfoField>>& segments, bool summarize = false) {
  std::string key = GroupKey(alone, segments, summarize);
  auto it = std::find_if(groups.begin(), groups.end(),
                         [&](const auto& group) { return group.first == key; });
  if (it == groups.end()) {
    groups.emplace_back(std::move(key), std::move(alone));
  } else {
    it->second.nodes.push_back(alone.nodes.front());
  }
}

// sinfo -R: the nodes down, drained or draining (or not responding), those
// of one reason, setter and time together, across partitions (a node
// counts once, under its first partition).
std::vector<SinfoRow> ReasonRows(const SinfoOptions& o,
                                 const std::vector<FormatSegment<SinfoField>>& segments,
                                 const v1::ListPartitionsResponse& parts,
                                 const v1::ListNodesResponse& nodes,
                                 const ReservedNodes& reserved) {
  static const v1::Partition kNone;
  SinfoGroups groups;
  const std::vector<std::string_view> wanted = CommaList(o.partitions);
  for (const v1::Node& node : nodes.nodes()) {
    const bool out = node.state() == v1::NODE_DOWN || node.state() == v1::NODE_DRAINED ||
                     node.state() == v1::NODE_DRAINING || node.not_responding();
    if (!out || !StateWanted(o.states, node.state(), ReservedState(node, reserved))) continue;
    const v1::Partition* partition = &kNone;
    for (const v1::Partition& p : parts.partitions()) {
      if (std::ranges::find(node.partitions(), p.name()) != node.partitions().end() &&
          (wanted.empty() || std::ranges::find(wanted, p.name()) != wanted.end())) {
        partition = &p;
        break;
      }
    }
    if (!wanted.empty() && partition == &kNone) continue;
    SinfoRow alone{partition, node.state(), {&node}, ReservedState(node, reserved)};
    if (o.node_oriented) {
      groups.emplace_back(std::string(), std::move(alone));
    } else {
      AddToGroup(groups, std::move(alone), segments);
    }
  }
  std::vector<SinfoRow> rows;
  for (auto& [key, row] : groups) rows.push_back(std::move(row));
  return rows;
}

// The rows sinfo prints: per partition, the nodes that look the same in
// every field of the format but the lists and counts (%N %n %D %C), as
// Slurm groups them; with -N, one row per node.
std::vector<SinfoRow> SinfoRows(const SinfoOptions& o,
                                const std::vector<FormatSegment<SinfoField>>& segments,
                                const v1::ListPartitionsResponse& parts,
                                const v1::ListNodesResponse& nodes, const ReservedNodes& reserved) {
  std::vector<SinfoRow> rows;
  if (o.reasons) return ReasonRows(o, segments, parts, nodes, reserved);
  for (const v1::Partition& p : parts.partitions()) {
    const std::vector<std::string_view> wanted = CommaList(o.partitions);
    if (!wanted.empty() && std::ranges::find(wanted, p.name()) == wanted.end()) continue;
    SinfoGroups groups;
    for (const v1::Node& node : nodes.nodes()) {
      const Reserved shown = ReservedState(node, reserved);
      if (std::find(node.partitions().begin(), node.partitions().end(), p.name()) ==
              node.partitions().end() ||
          !StateWanted(o.states, node.state(), shown)) {
        continue;
      }
      SinfoRow alone{&p, node.state(), {&node}, shown};
      if (o.node_oriented) {
        rows.push_back(std::move(alone));
      } else {
        AddToGroup(groups, std::move(alone), segments, o.summarize);
      }
    }
    for (auto& [key, row] : groups) rows.push_back(std::move(row));
  }
  return rows;
}

int Sinfo(const SinfoOptions& o) {
  if (o.reservations) {
    return SlurmStatus(CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
      absl::StatusOr<v1::ListReservationsResponse> list =
          client.ListReservations(v1::ListReservationsRequest{});
      if (!list.ok()) return list.status();
      if (list->reservations().empty()) {
        std::cout << "No reservations in the system\n";
        return absl::OkStatus();
      }
      std::vector<std::vector<std::string>> rows = ReservationRows(*list);
      if (o.no_header) rows.erase(rows.begin());
      PrintColumns(rows, std::cout);
      return absl::OkStatus();
    }));
  }
  std::string format = o.format;
  if (format.empty()) {
    if (const char* env = std::getenv("SINFO_FORMAT"); env != nullptr && *env != '\0') format = env;
  }
  if (format.empty()) {
    format = o.reasons         ? "%20E %9u %19H %N"
             : o.summarize     ? "%9P %.5a %.10l %.16F %N"
             : o.node_oriented ? "%N %.6D %P %.11T"
             : o.long_listing  ? "%9P %.5a %.10l %.6D %.11T %N"
                               : "%9P %.5a %.10l %.6D %.6t %N";
  }
  absl::StatusOr<std::vector<FormatSegment<SinfoField>>> segments =
      ParsePercentFormat(format, std::span<const SinfoField>(kSinfoFields));
  if (!segments.ok()) {
    std::cerr << fmt::format("sinfo: error: {}\n", segments.status().message());
    return 1;
  }
  return SlurmStatus(CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ListPartitionsResponse> parts =
        client.ListPartitions(v1::ListPartitionsRequest());
    if (!parts.ok()) return parts.status();
    v1::ListNodesRequest request;
    request.set_nodes(o.nodes);
    absl::StatusOr<v1::ListNodesResponse> nodes = client.ListNodes(request);
    if (!nodes.ok()) return nodes.status();
    absl::StatusOr<v1::ListReservationsResponse> reservations =
        client.ListReservations(v1::ListReservationsRequest{});
    if (!reservations.ok()) return reservations.status();
    if (!o.no_header) {
      std::cout << FormatLine(*segments, [](const SinfoField& f) { return std::string(f.header); })
                << '\n';
    }
    for (const SinfoRow& row : SinfoRows(o, *segments, *parts, *nodes, ReservedBy(*reservations))) {
      std::cout << FormatLine(*segments, [&](const SinfoField& f) { return f.value(row); }) << '\n';
    }
    return absl::OkStatus();
  }));
}

}  // namespace

void AddSinfoCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SinfoOptions>();
  app.set_help_flag("--help", "print this help and exit");  // -h is --noheader
  app.add_flag("-h,--noheader", o->no_header, "leave out the header line");
  std::vector<std::string> letters;
  for (const SinfoField& f : kSinfoFields)
    letters.push_back(fmt::format("%{} {}", f.letter, f.meaning));
  app.add_option(
      "-o,--format", o->format,
      fmt::format("fields: {}; %.10l right-aligns in 10 columns", fmt::join(letters, ", ")));
  app.add_option("-p,--partition", o->partitions, "only these partitions (comma separated)");
  app.add_option("-t,--states", o->states,
                 "only nodes in these states (idle, mix, alloc, drain, ...)");
  app.add_option("-n,--nodes", o->nodes, "only these nodes (a hostlist)");
  app.add_flag("-N,--Node", o->node_oriented, "one line per node");
  app.add_flag("-l,--long", o->long_listing, "states by their full name");
  app.add_flag("-R,--list-reasons", o->reasons,
               "the nodes down, drained or not responding, by reason: who gave it and when");
  app.add_flag("-s,--summarize", o->summarize,
               "one line a partition, its nodes counted allocated/idle/other/total (%F)");
  app.add_flag("-T,--reservation", o->reservations,
               "the reservations: name, state, start, end, duration, nodes");
  app.add_flag("-a,--all,-e,--exact,-v,--verbose")
      ->description("accepted: every partition is shown, exactly");
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.footer("Cohort's sinfo: the partitions and their nodes by state. See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = Sinfo(*o); });
}

}  // namespace cohort::cli
