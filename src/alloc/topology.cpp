// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/topology.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cohort/text/hostlist.h"
#include "config/conf_lexer.h"
#include "config/topology_yaml.h"

namespace cohort::topology {

std::optional<NodeId> Topology::FindNode(std::string_view name) const {
  const auto it = node_index_.find(std::string(name));
  if (it == node_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<SwitchId> Topology::FindSwitch(std::string_view name) const {
  const auto it = switch_index_.find(std::string(name));
  if (it == switch_index_.end()) return std::nullopt;
  return it->second;
}

SwitchId Topology::LowestCommonSwitch(SwitchId a, SwitchId b) const {
  if (a == kNone || b == kNone) return kNone;
  while (depth_[a] > depth_[b]) a = switches_[a].parent;
  while (depth_[b] > depth_[a]) b = switches_[b].parent;
  while (a != b) {
    a = switches_[a].parent;
    b = switches_[b].parent;
    if (a == kNone || b == kNone) return kNone;
  }
  return a;
}

SwitchId Topology::LowestCommonSwitch(std::span<const NodeId> nodes) const {
  if (nodes.empty()) return kNone;
  SwitchId common = leaf_of_[nodes.front()];
  for (const NodeId node : nodes.subspan(1)) {
    const SwitchId leaf = leaf_of_[node];
    if (leaf == common) continue;
    common = LowestCommonSwitch(common, leaf);
    if (common == kNone) return kNone;
  }
  return common;
}

std::string Topology::AddressOf(NodeId node) const {
  std::vector<std::string_view> parts;
  if (HasSwitchTree()) {
    for (SwitchId s = leaf_of_[node]; s != kNone; s = switches_[s].parent) {
      parts.push_back(switches_[s].name);
    }
    std::reverse(parts.begin(), parts.end());
  }
  if (block_of_[node] != kNone) parts.push_back(blocks_[block_of_[node]].name);
  parts.push_back(node_names_[node]);
  return fmt::format("{}", fmt::join(parts, "."));
}

std::string Topology::AddressPatternOf(NodeId node) const {
  std::vector<std::string_view> parts;
  if (HasSwitchTree()) {
    for (SwitchId s = leaf_of_[node]; s != kNone; s = switches_[s].parent)
      parts.push_back("switch");
  }
  if (block_of_[node] != kNone) parts.push_back("block");
  parts.push_back("node");
  return fmt::format("{}", fmt::join(parts, "."));
}

namespace {

constexpr std::array<std::string_view, 3> kLineKeys = {"SwitchName", "BlockName", "BlockSizes"};
constexpr std::array<std::string_view, 5> kSwitchKeys = {"Nodes", "Switches", "LinkSpeed",
                                                         "SpareNodes", "SwitchName"};
constexpr std::array<std::string_view, 3> kBlockKeys = {"Nodes", "SpareNodes", "BlockName"};

bool Is(const conf::Word& word, std::string_view key) { return EqualsIgnoreCase(word.key, key); }

// One SwitchName or BlockName definition after hostlist expansion and, for
// a hostlist name such as leaf[0-7], the even split of its members.
struct Definition {
  std::string name;
  std::vector<std::string> nodes;
  std::vector<std::string> switches;
  /// SpareNodes=: those of `nodes` held back for gang repairs (every name
  /// of the line's list before the split; Build keeps this one's).
  std::vector<std::string> spares;
  SourceLocation spares_at;
  bool has_nodes = false;
  bool has_switches = false;
  bool reported = false;  ///< from the nodes' NVLink domains (TopologyBlocks=auto)
  SourceLocation at;
  SourceLocation members_at;
};

// Splits `members` evenly over `names`: leaf[0-7] Nodes=gpu[001-064] gives
// each leaf eight consecutive nodes.
bool SplitEvenly(const conf::Word& head, const std::vector<std::string>& names,
                 const conf::Word& member_word, std::vector<std::string>& members,
                 std::vector<std::vector<std::string>>& out, Diagnostics& diagnostics) {
  out.assign(names.size(), {});
  if (names.size() == 1) {
    out[0] = std::move(members);
    return true;
  }
  if (members.size() % names.size() != 0) {
    diagnostics.Error(member_word.value_at,
                      fmt::format("{} names {} switches but {} members, which do not divide evenly",
                                  head.value, names.size(), members.size()),
                      "give each switch its own line, or a member count that is a multiple");
    return false;
  }
  const std::size_t each = members.size() / names.size();
  for (std::size_t i = 0; i < names.size(); ++i) {
    out[i].assign(
        std::make_move_iterator(members.begin() + static_cast<std::ptrdiff_t>(i * each)),
        std::make_move_iterator(members.begin() + static_cast<std::ptrdiff_t>((i + 1) * each)));
  }
  return true;
}

}  // namespace

class TopologyBuilder {
 public:
  TopologyBuilder(std::string_view file, Diagnostics& diagnostics)
      : file_(file), diagnostics_(diagnostics) {}

  void Parse(std::string_view text) {
    const std::vector<conf::Line> lines = conf::IsYamlPath(file_)
                                              ? conf::TopologyYamlLines(text, file_, diagnostics_)
                                              : conf::Lex(text, file_, diagnostics_);
    for (const conf::Line& line : lines) {
      const conf::Word& head = line.words.front();
      if (reading_reported_ && !Is(head, "BlockName")) {
        diagnostics_.Error(head.key_at, "the reported NVLink blocks hold BlockName lines only",
                           "the controller rewrites this file; remove it to start afresh");
      } else if (Is(head, "SwitchName")) {
        ParseDefinition(line, switch_defs_, kSwitchKeys);
      } else if (Is(head, "BlockName") && refuse_block_lines_) {
        diagnostics_.Error(head.key_at,
                           "BlockName lines are not read with TopologyBlocks=auto: the blocks are "
                           "the NVLink domains the nodes report",
                           "remove the line, or set TopologyBlocks=file in cohort.conf");
      } else if (Is(head, "BlockName")) {
        const std::size_t before = block_defs_.size();
        ParseDefinition(line, block_defs_, kBlockKeys);
        for (std::size_t i = before; i < block_defs_.size(); ++i) {
          block_defs_[i].reported = reading_reported_;
        }
      } else if (Is(head, "BlockSizes")) {
        ParseBlockSizes(line);
      } else {
        conf::ReportUnknownKey(head, "at the start of a topology.conf line", kLineKeys,
                               diagnostics_);
      }
    }
  }

  // TopologyBlocks=auto: the blocks are `reported`'s, none of the topology
  // file's (which Parse then refuses).
  void RefuseBlockLines() { refuse_block_lines_ = true; }
  void ParseReported(const ReportedBlocks& reported) {
    const std::string_view file = file_;
    file_ = reported.file;
    refuse_block_lines_ = false;
    reading_reported_ = true;
    Parse(reported.text);
    reading_reported_ = false;
    file_ = file;
  }

  Topology Build(std::span<const std::string> node_names, NodeSource source) {
    Topology& t = topology_;
    if (source == NodeSource::kConfig) {
      for (const std::string& name : node_names) AddNode(name);
    } else {
      for (const Definition& def : switch_defs_) {
        for (const std::string& name : def.nodes) AddNode(name);
      }
      for (const Definition& def : block_defs_) {
        for (const std::string& name : def.nodes) AddNode(name);
      }
    }
    t.leaf_of_.assign(t.node_names_.size(), kNone);
    t.block_of_.assign(t.node_names_.size(), kNone);

    if (switch_defs_.empty()) {
      AddImplicitSwitch();
    } else if (!BuildSwitches()) {
      return std::move(topology_);
    }
    BuildBlocks();
    MarkSpares();
    if (diagnostics_.HasErrors()) return std::move(topology_);
    ComputeShape();
    BuildGroups();
    BuildBlockLevels();
    ComputeOrder();
    return std::move(topology_);
  }

  void AddFlatNodes(std::span<const std::string> node_names) {
    for (const std::string& name : node_names) AddNode(name);
    topology_.leaf_of_.assign(topology_.node_names_.size(), kNone);
    topology_.block_of_.assign(topology_.node_names_.size(), kNone);
    AddImplicitSwitch();
    ComputeShape();
    BuildGroups();
    ComputeOrder();
  }

  Topology Take() { return std::move(topology_); }

 private:
  template <std::size_t N>
  void ParseDefinition(const conf::Line& line, std::vector<Definition>& out,
                       const std::array<std::string_view, N>& known) {
    const conf::Word& head = line.words.front();
    std::vector<std::string> names;
    if (!conf::ExpandHostlistValue(head, names, diagnostics_)) return;
    std::vector<std::vector<std::string>> nodes;
    std::vector<std::vector<std::string>> switches;
    Definition base;
    base.at = head.key_at;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      const conf::Word& word = line.words[i];
      std::vector<std::string> members;
      if (Is(word, "Nodes")) {
        base.has_nodes = true;
        base.members_at = word.value_at;
        if (!conf::ExpandHostlistValue(word, members, diagnostics_) ||
            !SplitEvenly(head, names, word, members, nodes, diagnostics_)) {
          return;
        }
      } else if (Is(word, "Switches") && N == kSwitchKeys.size()) {
        base.has_switches = true;
        base.members_at = word.value_at;
        if (!conf::ExpandHostlistValue(word, members, diagnostics_) ||
            !SplitEvenly(head, names, word, members, switches, diagnostics_)) {
          return;
        }
      } else if (Is(word, "LinkSpeed") && N == kSwitchKeys.size()) {
        long long speed = 0;
        if (!conf::ParseInt(word, conf::ZeroPolicy::kAllowZero, speed, diagnostics_)) return;
      } else if (Is(word, "SpareNodes")) {
        base.spares_at = word.value_at;
        if (!conf::ExpandHostlistValue(word, base.spares, diagnostics_)) return;
      } else {
        conf::ReportUnknownKey(word, fmt::format("in a {} line", head.key), known, diagnostics_);
        return;
      }
    }
    if (base.has_nodes && base.has_switches) {
      diagnostics_.Error(head.key_at,
                         fmt::format("switch {} lists both Nodes= and Switches=", head.value),
                         "a leaf switch lists Nodes=, a switch above the leaves lists Switches=");
      return;
    }
    if (!base.spares.empty() && !base.has_nodes) {
      diagnostics_.Error(base.spares_at,
                         fmt::format("switch {} has SpareNodes= but no Nodes=", head.value),
                         "spares belong to a leaf switch or a block: put SpareNodes= on the "
                         "SwitchName line that lists them in Nodes=, or on their BlockName line");
      return;
    }
    if (!base.has_nodes && !base.has_switches) {
      diagnostics_.Error(head.key_at, fmt::format("{} {} has no members", head.key, head.value),
                         N == kSwitchKeys.size() ? "add Nodes=<hostlist> or Switches=<hostlist>"
                                                 : "add Nodes=<hostlist>");
      return;
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      Definition def = base;
      def.name = names[i];
      if (base.has_nodes) def.nodes = std::move(nodes[i]);
      if (base.has_switches) def.switches = std::move(switches[i]);
      out.push_back(std::move(def));
    }
  }

  void ParseBlockSizes(const conf::Line& line) {
    const conf::Word& word = line.words.front();
    std::vector<int> sizes;
    if (conf::SplitCommas(word.value).empty()) {
      diagnostics_.Error(word.value_at, "BlockSizes is empty", "for example BlockSizes=18,36,72");
      return;
    }
    for (const std::string& item : conf::SplitCommas(word.value)) {
      int size = 0;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), size);
      if (error != std::errc() || end != item.data() + item.size() || size <= 0 ||
          (!sizes.empty() && size <= sizes.back())) {
        diagnostics_.Error(
            word.value_at,
            fmt::format("BlockSizes must be increasing positive numbers, found \"{}\"", word.value),
            "for example BlockSizes=18,36,72");
        return;
      }
      if (!sizes.empty() && (size % sizes.front() != 0 ||
                             !std::has_single_bit(static_cast<unsigned>(size / sizes.front())))) {
        diagnostics_.Error(
            word.value_at,
            fmt::format("BlockSizes {}: {} is not the base block size {} times a power of two",
                        word.value, size, sizes.front()),
            fmt::format("list the base block size, then aggregates of 2, 4, 8… blocks, such as "
                        "BlockSizes={},{},{}",
                        sizes.front(), sizes.front() * 2, sizes.front() * 4));
        return;
      }
      sizes.push_back(size);
    }
    topology_.block_sizes_ = std::move(sizes);
    block_sizes_at_ = word.value_at;
    for (std::size_t i = 1; i < line.words.size(); ++i) {
      conf::ReportUnknownKey(line.words[i], "after BlockSizes", kLineKeys, diagnostics_);
    }
  }

  void AddNode(const std::string& name) {
    if (topology_.node_index_.emplace(name, static_cast<NodeId>(topology_.node_names_.size()))
            .second) {
      topology_.node_names_.push_back(name);
    }
  }

  void AddImplicitSwitch() {
    Switch root;
    root.name = "cluster";
    root.implicit = true;
    for (NodeId n = 0; n < topology_.NodeCount(); ++n) {
      root.nodes.push_back(n);
      topology_.leaf_of_[n] = 0;
    }
    topology_.switch_index_.emplace(root.name, 0);
    topology_.switches_.push_back(std::move(root));
  }

  // Resolves node names of one definition, reporting the unknown ones.
  std::vector<NodeId> ResolveNodes(const Definition& def, std::string_view what) {
    std::vector<NodeId> ids;
    std::vector<std::string> unknown;
    for (const std::string& name : def.nodes) {
      const std::optional<NodeId> id = topology_.FindNode(name);
      if (id) {
        ids.push_back(*id);
      } else {
        unknown.push_back(name);
      }
    }
    if (!unknown.empty() && def.reported) {
      diagnostics_.Warning(def.members_at,
                           fmt::format("{} {} of the reported NVLink domains names nodes the "
                                       "cluster does not have: {}; they are left out",
                                       what, def.name, hostlist::Compress(unknown)),
                           "the controller rewrites this file as the nodes report again");
    } else if (!unknown.empty()) {
      diagnostics_.Error(def.members_at,
                         fmt::format("{} {} names nodes with no NodeName line: {}", what, def.name,
                                     hostlist::Compress(unknown)),
                         "define them in cohort.conf, or remove them from this line");
    }
    return ids;
  }

  bool BuildSwitches() {
    Topology& t = topology_;
    for (const Definition& def : switch_defs_) {
      const auto [it, inserted] =
          t.switch_index_.emplace(def.name, static_cast<SwitchId>(t.switches_.size()));
      if (!inserted) {
        diagnostics_.Error(def.at,
                           fmt::format("switch {} is defined twice (first at line {})", def.name,
                                       t.switches_[it->second].defined_at.line),
                           "merge the two SwitchName lines");
        continue;
      }
      Switch s;
      s.name = def.name;
      s.defined_at = def.at;
      t.switches_.push_back(std::move(s));
    }

    for (const Definition& def : switch_defs_) {
      const SwitchId id = t.switch_index_.at(def.name);
      if (t.switches_[id].defined_at.line != def.at.line) continue;  // a duplicate
      if (def.has_nodes) {
        // Nodes under two leaves, reported once per (line, other leaf).
        std::map<SwitchId, std::vector<std::string>> clashes;
        for (const NodeId n : ResolveNodes(def, "switch")) {
          if (t.leaf_of_[n] != kNone) {
            clashes[t.leaf_of_[n]].push_back(t.node_names_[n]);
            continue;
          }
          t.leaf_of_[n] = id;
          t.switches_[id].nodes.push_back(n);
        }
        for (const auto& [other, names] : clashes) {
          diagnostics_.Error(
              def.members_at,
              fmt::format("{} {} {} under two leaf switches ({}, {})",
                          names.size() == 1 ? "node" : "nodes", hostlist::Compress(names),
                          names.size() == 1 ? "is" : "are", t.switches_[other].name, def.name),
              "a node connects to exactly one leaf switch; remove it from one line");
        }
      }
      std::vector<std::string> undefined;
      for (const std::string& child_name : def.switches) {
        const auto child = t.switch_index_.find(child_name);
        if (child == t.switch_index_.end()) {
          undefined.push_back(child_name);
          continue;
        }
        Switch& c = t.switches_[child->second];
        if (c.parent != kNone) {
          diagnostics_.Error(def.members_at,
                             fmt::format("switch {} is under two switches ({}, {})", child_name,
                                         t.switches_[c.parent].name, def.name),
                             "the network model is a tree: give each switch one parent");
          continue;
        }
        c.parent = id;
        t.switches_[id].children.push_back(child->second);
      }
      if (!undefined.empty()) {
        diagnostics_.Error(def.members_at,
                           fmt::format("switch {} refers to undefined switches: {}", def.name,
                                       hostlist::Compress(undefined)),
                           "define each with its own SwitchName line, or fix the name");
      }
    }
    if (!CheckAcyclic()) return false;

    std::vector<std::string> unplaced;
    for (NodeId n = 0; n < t.NodeCount(); ++n) {
      if (t.leaf_of_[n] == kNone) unplaced.push_back(t.node_names_[n]);
    }
    if (!unplaced.empty()) {
      diagnostics_.Error(
          {std::string(file_), 0, 0},
          fmt::format("nodes under no leaf switch: {}", hostlist::Compress(unplaced)),
          "add them to a SwitchName=... Nodes=... line, or remove their NodeName lines");
    }
    return !diagnostics_.HasErrors();
  }

  // Walks down from every switch; a switch met again on the current path
  // closes a cycle, reported once with its members.
  bool CheckAcyclic() {
    const Topology& t = topology_;
    enum class Mark : std::uint8_t { kNew, kOnPath, kDone };
    std::vector<Mark> mark(t.switches_.size(), Mark::kNew);
    std::vector<SwitchId> path;
    bool ok = true;
    auto visit = [&](auto&& self, SwitchId s) -> void {
      mark[s] = Mark::kOnPath;
      path.push_back(s);
      for (const SwitchId c : t.switches_[s].children) {
        if (mark[c] == Mark::kOnPath) {
          std::vector<std::string> cycle;
          auto from = std::find(path.begin(), path.end(), c);
          for (auto it = from; it != path.end(); ++it) cycle.push_back(t.switches_[*it].name);
          cycle.push_back(t.switches_[c].name);
          diagnostics_.Error(t.switches_[s].defined_at,
                             fmt::format("switches form a cycle: {}", fmt::join(cycle, " -> ")),
                             "a switch cannot be below itself; remove one of these links");
          ok = false;
        } else if (mark[c] == Mark::kNew) {
          self(self, c);
        }
      }
      path.pop_back();
      mark[s] = Mark::kDone;
    };
    for (SwitchId s = 0; s < static_cast<SwitchId>(t.switches_.size()); ++s) {
      if (mark[s] == Mark::kNew) visit(visit, s);
    }
    return ok;
  }

  void BuildBlocks() {
    Topology& t = topology_;
    std::set<std::string> names;
    for (const Definition& def : block_defs_) {
      if (!names.insert(def.name).second) {
        diagnostics_.Error(def.at, fmt::format("block {} is defined twice", def.name),
                           "merge the two BlockName lines");
        continue;
      }
      const BlockId id = static_cast<BlockId>(t.blocks_.size());
      Block block;
      block.name = def.name;
      block.defined_at = def.at;
      std::map<BlockId, std::vector<std::string>> clashes;
      for (const NodeId n : ResolveNodes(def, "block")) {
        if (t.block_of_[n] != kNone) {
          clashes[t.block_of_[n]].push_back(t.node_names_[n]);
          continue;
        }
        t.block_of_[n] = id;
        block.nodes.push_back(n);
      }
      for (const auto& [other, clash] : clashes) {
        diagnostics_.Error(
            def.members_at,
            fmt::format("{} {} {} in two blocks ({}, {})", clash.size() == 1 ? "node" : "nodes",
                        hostlist::Compress(clash), clash.size() == 1 ? "is" : "are",
                        t.blocks_[other].name, def.name),
            "an NVLink domain is physical: each node is in at most one block");
      }
      t.blocks_.push_back(std::move(block));
    }
  }

  // SpareNodes=: each name must be one of its line's Nodes=.
  void MarkSpares() {
    Topology& t = topology_;
    t.spare_.assign(t.node_names_.size(), 0);
    auto mark = [&](const std::vector<Definition>& defs, std::string_view what) {
      std::map<int, std::vector<std::string>> outside;  // by line: spares in none of its defs
      std::map<int, const Definition*> first;
      std::set<std::pair<int, std::string>> placed;
      for (const Definition& def : defs) {
        if (def.spares.empty()) continue;
        first.try_emplace(def.at.line, &def);
        for (const std::string& name : def.spares) {
          if (std::find(def.nodes.begin(), def.nodes.end(), name) == def.nodes.end()) continue;
          placed.emplace(def.at.line, name);
          if (const std::optional<NodeId> id = t.FindNode(name)) t.spare_[*id] = 1;
        }
      }
      for (const auto& [line, def] : first) {
        for (const std::string& name : def->spares) {
          if (!placed.contains({line, name})) outside[line].push_back(name);
        }
        if (const auto it = outside.find(line); it != outside.end()) {
          diagnostics_.Error(
              def->spares_at,
              fmt::format("SpareNodes= names {} not in this {}'s Nodes=: {}",
                          it->second.size() == 1 ? "a node" : "nodes", what,
                          hostlist::Compress(it->second)),
              fmt::format("a spare serves the {} it sits in: list it in Nodes= as well", what));
        }
      }
    };
    mark(switch_defs_, "switch");
    mark(block_defs_, "block");
  }

  void ComputeShape() {
    Topology& t = topology_;
    const auto count = static_cast<SwitchId>(t.switches_.size());
    // Levels: leaves are 0, a switch one above its highest child. Children
    // are finished first by walking in post-order from each root.
    std::vector<bool> done(t.switches_.size(), false);
    auto level = [&](auto&& self, SwitchId s) -> void {
      Switch& sw = t.switches_[s];
      int highest = -1;
      int nodes = static_cast<int>(sw.nodes.size());
      for (const SwitchId c : sw.children) {
        if (!done[c]) self(self, c);
        highest = std::max(highest, t.switches_[c].level);
        nodes += t.switches_[c].node_count;
      }
      sw.level = sw.children.empty() ? 0 : highest + 1;
      sw.node_count = nodes;
      done[s] = true;
    };
    t.depth_.assign(t.switches_.size(), 0);
    for (SwitchId s = 0; s < count; ++s) {
      if (t.switches_[s].parent != kNone) continue;
      t.roots_.push_back(s);
      level(level, s);
      // Depth from the root, for common-ancestor walks.
      std::vector<SwitchId> stack = {s};
      while (!stack.empty()) {
        const SwitchId x = stack.back();
        stack.pop_back();
        for (const SwitchId c : t.switches_[x].children) {
          t.depth_[c] = t.depth_[x] + 1;
          stack.push_back(c);
        }
      }
    }
    t.by_level_.resize(t.switches_.size());
    for (SwitchId s = 0; s < count; ++s) t.by_level_[s] = s;
    std::stable_sort(t.by_level_.begin(), t.by_level_.end(), [&](SwitchId a, SwitchId b) {
      return t.switches_[a].level < t.switches_[b].level;
    });
    for (const Switch& s : t.switches_) t.max_level_ = std::max(t.max_level_, s.level);
    for (const SwitchId leaf : t.by_level_) {
      if (!t.switches_[leaf].children.empty()) continue;
      for (SwitchId s = leaf; s != kNone; s = t.switches_[s].parent) {
        t.switches_[s].leaves.push_back(leaf);
      }
    }
    for (Switch& s : t.switches_) std::sort(s.leaves.begin(), s.leaves.end());

    if (t.roots_.size() > 1) {
      std::vector<std::string> roots;
      for (const SwitchId r : t.roots_) roots.push_back(t.switches_[r].name);
      diagnostics_.Warning({std::string(file_), 0, 0},
                           fmt::format("{} switch trees have no common ancestor (tops: {}); no job "
                                       "may span them",
                                       roots.size(), fmt::join(roots, ", ")),
                           "add a SwitchName line above them if they are connected");
    }
  }

  void BuildGroups() {
    Topology& t = topology_;
    t.group_of_.assign(t.node_names_.size(), kNone);
    for (BlockId b = 0; b < static_cast<BlockId>(t.blocks_.size()); ++b) {
      Group group;
      group.block = b;
      group.nodes = t.blocks_[b].nodes;
      group.home = t.LowestCommonSwitch(group.nodes);
      if (group.home == kNone && !group.nodes.empty()) {
        diagnostics_.Error(
            t.blocks_[b].defined_at,
            fmt::format("block {} spans switch trees with no common ancestor", t.blocks_[b].name),
            "an NVLink domain must sit under one switch tree");
        continue;
      }
      if (group.nodes.empty()) continue;
      AddGroup(std::move(group));
    }
    for (const SwitchId leaf : t.by_level_) {
      if (!t.switches_[leaf].children.empty()) continue;
      Group group;
      group.home = leaf;
      for (const NodeId n : t.switches_[leaf].nodes) {
        if (t.block_of_[n] == kNone) group.nodes.push_back(n);
      }
      if (!group.nodes.empty()) AddGroup(std::move(group));
    }
    for (Switch& s : t.switches_) std::sort(s.groups.begin(), s.groups.end());
  }

  // BlockSizes: level 0 each block alone, level k runs of consecutive blocks.
  void BuildBlockLevels() {
    Topology& t = topology_;
    t.group_of_block_.assign(t.blocks_.size(), kNone);
    for (GroupId g = 0; g < static_cast<GroupId>(t.groups_.size()); ++g) {
      if (t.groups_[g].block != kNone) t.group_of_block_[t.groups_[g].block] = g;
    }
    if (t.block_sizes_.empty()) return;
    if (t.blocks_.empty()) {
      diagnostics_.Warning(block_sizes_at_, "BlockSizes is given but no BlockName line is",
                           "add the blocks, or remove BlockSizes");
      return;
    }
    const int base = t.block_sizes_.front();
    for (const Block& block : t.blocks_) {
      if (static_cast<int>(block.nodes.size()) >= base) continue;
      diagnostics_.Warning(
          block.defined_at,
          fmt::format("block {} has {} nodes, fewer than the base block size {} (BlockSizes)",
                      block.name, block.nodes.size(), base),
          "jobs that need a whole base block cannot use it; list its missing nodes, or lower "
          "the first BlockSizes");
    }
    const auto blocks = static_cast<BlockId>(t.blocks_.size());
    for (const int size : t.block_sizes_) {
      BlockLevel level;
      level.size = size;
      const auto run = static_cast<BlockId>(size / base);
      for (BlockId first = 0; first + run <= blocks; first += run) {
        std::vector<BlockId>& aggregate = level.aggregates.emplace_back();
        for (BlockId b = first; b < first + run; ++b) aggregate.push_back(b);
      }
      if (level.aggregates.empty()) {
        diagnostics_.Warning(block_sizes_at_,
                             fmt::format("BlockSizes {}: the {} blocks make no aggregate of {} "
                                         "nodes ({} blocks)",
                                         fmt::join(t.block_sizes_, ","), blocks, size, run),
                             "drop the sizes larger than the blocks can make");
        break;
      }
      t.block_levels_.push_back(std::move(level));
    }
  }

  // Topology order: switches depth first from each root in the file's
  // order, the groups homed at a switch by id, a group's nodes in order.
  void ComputeOrder() {
    Topology& t = topology_;
    std::vector<std::vector<GroupId>> homed(t.switches_.size());
    for (GroupId g = 0; g < static_cast<GroupId>(t.groups_.size()); ++g) {
      if (t.groups_[g].home != kNone) homed[t.groups_[g].home].push_back(g);
    }
    t.order_of_.assign(t.node_names_.size(), -1);
    int next = 0;
    std::vector<SwitchId> stack;
    for (auto root = t.roots_.rbegin(); root != t.roots_.rend(); ++root) stack.push_back(*root);
    while (!stack.empty()) {
      const SwitchId s = stack.back();
      stack.pop_back();
      for (const GroupId g : homed[s]) {
        for (const NodeId n : t.groups_[g].nodes) t.order_of_[n] = next++;
      }
      const std::vector<SwitchId>& children = t.switches_[s].children;
      for (auto c = children.rbegin(); c != children.rend(); ++c) stack.push_back(*c);
    }
    // Nodes in no group (none when the topology is whole) go last.
    for (int& order : t.order_of_) {
      if (order < 0) order = next++;
    }
  }

  void AddGroup(Group group) {
    Topology& t = topology_;
    const auto id = static_cast<GroupId>(t.groups_.size());
    for (const NodeId n : group.nodes) t.group_of_[n] = id;
    for (SwitchId s = group.home; s != kNone; s = t.switches_[s].parent) {
      t.switches_[s].groups.push_back(id);
    }
    t.groups_.push_back(std::move(group));
  }

  std::string_view file_;
  Diagnostics& diagnostics_;
  std::vector<Definition> switch_defs_;
  std::vector<Definition> block_defs_;
  bool refuse_block_lines_ = false;
  bool reading_reported_ = false;
  SourceLocation block_sizes_at_;
  Topology topology_;
};

TopologyResult BuildTopology(std::string_view text, std::string_view file,
                             std::span<const std::string> node_names, NodeSource source,
                             const ReportedBlocks* reported) {
  TopologyResult result;
  TopologyBuilder builder(file, result.diagnostics);
  if (reported != nullptr) builder.RefuseBlockLines();
  builder.Parse(text);
  if (reported != nullptr) builder.ParseReported(*reported);
  result.topology = builder.Build(node_names, source);
  return result;
}

Topology FlatTopology(std::span<const std::string> node_names) {
  Diagnostics unused;
  TopologyBuilder builder("", unused);
  builder.AddFlatNodes(node_names);
  return builder.Take();
}

}  // namespace cohort::topology
