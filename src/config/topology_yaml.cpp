// SPDX-License-Identifier: Apache-2.0
#include "config/topology_yaml.h"

#include <yaml.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace cohort::conf {
namespace {

constexpr std::array<std::string_view, 5> kTopologyKeys = {"topology", "cluster_default", "tree",
                                                           "block", "flat"};
constexpr std::array<std::string_view, 1> kTreeKeys = {"switches"};
constexpr std::array<std::string_view, 3> kSwitchKeys = {"switch", "children", "nodes"};
constexpr std::array<std::string_view, 2> kBlockTopologyKeys = {"block_sizes", "blocks"};
constexpr std::array<std::string_view, 2> kBlockKeys = {"block", "nodes"};

constexpr std::string_view kExample =
    "for example:\n  - topology: fabric\n    cluster_default: true\n    tree:\n      switches:\n"
    "        - switch: leaf1\n          nodes: gpu[001-018]";

// libyaml's parser and one loaded document, released together.
class YamlDocument {
 public:
  YamlDocument() { yaml_parser_initialize(&parser_); }
  ~YamlDocument() {
    if (loaded_) yaml_document_delete(&document_);
    yaml_parser_delete(&parser_);
  }
  YamlDocument(const YamlDocument&) = delete;
  YamlDocument& operator=(const YamlDocument&) = delete;

  void SetInput(std::string_view text) {
    // libyaml reads the bytes only; the cast is its API's.
    yaml_parser_set_input_string(&parser_,
                                 reinterpret_cast<const unsigned char*>(text.data()),  // NOLINT
                                 text.size());
  }

  /// Loads the next document; false on a syntax error (see Problem()).
  bool LoadNext() {
    if (loaded_) yaml_document_delete(&document_);
    loaded_ = yaml_parser_load(&parser_, &document_) != 0;
    return loaded_;
  }

  [[nodiscard]] yaml_document_t* Document() { return &document_; }
  [[nodiscard]] const yaml_parser_t& Parser() const { return parser_; }

 private:
  yaml_parser_t parser_{};
  yaml_document_t document_{};
  bool loaded_ = false;
};

enum class Kind { kNone, kTree, kBlock, kFlat };

// One entry of the file's list of topologies.
struct Entry {
  std::string name;
  SourceLocation at;
  bool is_default = false;
  Kind kind = Kind::kNone;
  const yaml_node_t* body = nullptr;
  SourceLocation kind_at;
};

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kTree:
      return "tree";
    case Kind::kBlock:
      return "block";
    case Kind::kFlat:
      return "flat";
    case Kind::kNone:
      break;
  }
  return "untyped";
}

class Reader {
 public:
  Reader(std::string_view file, Diagnostics& diagnostics)
      : file_(file), diagnostics_(diagnostics) {}

  std::vector<Line> Run(std::string_view text) {
    YamlDocument yaml;
    yaml.SetInput(text);
    if (!yaml.LoadNext()) {
      ReportSyntax(yaml.Parser());
      return {};
    }
    document_ = yaml.Document();
    const yaml_node_t* root = yaml_document_get_root_node(document_);
    if (root == nullptr) {
      diagnostics_.Error({file_, 1, 1}, "topology.yaml holds no topology", std::string(kExample));
      return {};
    }
    seen_.assign(static_cast<std::size_t>(document_->nodes.top - document_->nodes.start), false);
    std::vector<Entry> entries = ReadEntries(root);
    std::vector<Line> lines;
    if (!diagnostics_.HasErrors()) {
      if (const Entry* tree = Choose(entries, Kind::kTree)) ReadTree(*tree, lines);
      if (const Entry* block = Choose(entries, Kind::kBlock)) ReadBlock(*block, lines);
      WarnAboutFlat(entries);
    }
    // Slurm reads one document; a second one would be silently dropped.
    document_ = nullptr;
    if (!yaml.LoadNext()) {
      ReportSyntax(yaml.Parser());
    } else if (const yaml_node_t* next = yaml_document_get_root_node(yaml.Document())) {
      diagnostics_.Error(At(next), "topology.yaml holds a second YAML document",
                         "list every topology in the first document, and remove the second ---");
    }
    return lines;
  }

 private:
  SourceLocation At(const yaml_node_t* node) const {
    return {file_, static_cast<int>(node->start_mark.line) + 1,
            static_cast<int>(node->start_mark.column) + 1};
  }

  void ReportSyntax(const yaml_parser_t& parser) {
    const yaml_mark_t& mark = parser.problem_mark;
    std::string message = parser.problem != nullptr ? parser.problem : "malformed YAML";
    if (parser.context != nullptr) message = fmt::format("{} {}", parser.context, message);
    diagnostics_.Error({file_, static_cast<int>(mark.line) + 1, static_cast<int>(mark.column) + 1},
                       fmt::format("not valid YAML: {}", message),
                       "indent each topology's keys under its `- topology:` line, with spaces");
  }

  // The node at `index`; null, with an error, for one reached twice (a YAML
  // alias): walking aliases could multiply the work without bound.
  const yaml_node_t* Node(int index, const yaml_node_t* from) {
    const yaml_node_t* node = yaml_document_get_node(document_, index);
    if (node == nullptr) return nullptr;
    const auto slot = static_cast<std::size_t>(index - 1);
    if (seen_[slot]) {
      diagnostics_.Error(At(from), "topology.yaml uses a YAML alias (*name)",
                         "write the value out where it is used");
      return nullptr;
    }
    seen_[slot] = true;
    return node;
  }

  static std::string_view Text(const yaml_node_t* node) {
    return {reinterpret_cast<const char*>(node->data.scalar.value),  // NOLINT: libyaml's type
            node->data.scalar.length};
  }

  bool Expect(const yaml_node_t* node, yaml_node_type_t type, std::string_view what) {
    if (node->type == type) return true;
    std::string_view wanted = "a value";
    if (type == YAML_MAPPING_NODE) wanted = "a mapping of keys";
    if (type == YAML_SEQUENCE_NODE) wanted = "a list (lines starting with -)";
    diagnostics_.Error(At(node), fmt::format("{} must be {}", what, wanted), std::string(kExample));
    return false;
  }

  // The pairs of a mapping, resolved, with unknown and repeated keys reported.
  struct Pair {
    std::string_view key;
    SourceLocation key_at;
    const yaml_node_t* value;
  };
  template <std::size_t N>
  std::vector<Pair> Pairs(const yaml_node_t* mapping, std::string_view context,
                          const std::array<std::string_view, N>& known) {
    std::vector<Pair> pairs;
    for (const yaml_node_pair_t* pair = mapping->data.mapping.pairs.start;
         pair < mapping->data.mapping.pairs.top; ++pair) {
      const yaml_node_t* key = Node(pair->key, mapping);
      const yaml_node_t* value = Node(pair->value, mapping);
      if (key == nullptr || value == nullptr) continue;
      if (!Expect(key, YAML_SCALAR_NODE, fmt::format("a key {}", context))) continue;
      const std::string_view name = Text(key);
      if (std::ranges::find(known, name) == known.end()) {
        ReportUnknownKey({std::string(name), {}, At(key), At(value)}, context, known, diagnostics_);
        continue;
      }
      if (std::ranges::any_of(pairs, [&](const Pair& p) { return p.key == name; })) {
        diagnostics_.Error(At(key), fmt::format("{} is given twice {}", name, context),
                           "keep one of them");
        continue;
      }
      pairs.push_back({name, At(key), value});
    }
    return pairs;
  }

  static const Pair* Find(const std::vector<Pair>& pairs, std::string_view key) {
    const auto it = std::ranges::find(pairs, key, &Pair::key);
    return it == pairs.end() ? nullptr : &*it;
  }

  std::optional<std::string> ScalarValue(const Pair& pair) {
    if (!Expect(pair.value, YAML_SCALAR_NODE, std::string(pair.key))) return std::nullopt;
    return std::string(Text(pair.value));
  }

  std::optional<bool> BoolValue(const Pair& pair) {
    const std::optional<std::string> text = ScalarValue(pair);
    if (!text) return std::nullopt;
    for (const std::string_view yes : {"true", "yes", "on"}) {
      if (EqualsIgnoreCase(*text, yes)) return true;
    }
    for (const std::string_view no : {"false", "no", "off"}) {
      if (EqualsIgnoreCase(*text, no)) return false;
    }
    diagnostics_.Error(At(pair.value),
                       fmt::format("{} must be true or false, found \"{}\"", pair.key, *text),
                       fmt::format("write {}: true", pair.key));
    return std::nullopt;
  }

  // A list of names or numbers, as one comma-separated value: a scalar
  // (`nodes: gpu[01-18]`, `block_sizes: 18,36`) or a list of scalars.
  std::optional<std::string> ListValue(const Pair& pair) {
    if (pair.value->type == YAML_SCALAR_NODE) return std::string(Text(pair.value));
    if (!Expect(pair.value, YAML_SEQUENCE_NODE, std::string(pair.key))) return std::nullopt;
    std::string joined;
    for (const yaml_node_item_t* item = pair.value->data.sequence.items.start;
         item < pair.value->data.sequence.items.top; ++item) {
      const yaml_node_t* node = Node(*item, pair.value);
      if (node == nullptr) return std::nullopt;
      if (!Expect(node, YAML_SCALAR_NODE, fmt::format("each item of {}", pair.key))) {
        return std::nullopt;
      }
      if (!joined.empty()) joined += ',';
      joined += Text(node);
    }
    return joined;
  }

  Word MakeWord(std::string key, const Pair& pair, std::string value) const {
    return {std::move(key), std::move(value), pair.key_at, At(pair.value)};
  }

  std::vector<Entry> ReadEntries(const yaml_node_t* root) {
    std::vector<Entry> entries;
    if (!Expect(root, YAML_SEQUENCE_NODE, "topology.yaml")) return entries;
    for (const yaml_node_item_t* item = root->data.sequence.items.start;
         item < root->data.sequence.items.top; ++item) {
      const yaml_node_t* node = Node(*item, root);
      if (node == nullptr || !Expect(node, YAML_MAPPING_NODE, "each topology")) continue;
      std::optional<Entry> entry = ReadEntry(node);
      if (!entry) continue;
      if (std::ranges::any_of(entries, [&](const Entry& e) { return e.name == entry->name; })) {
        diagnostics_.Error(entry->at, fmt::format("topology {} is defined twice", entry->name),
                           "give each topology a name of its own");
        continue;
      }
      entries.push_back(std::move(*entry));
    }
    return entries;
  }

  std::optional<Entry> ReadEntry(const yaml_node_t* node) {
    const int errors_before = diagnostics_.ErrorCount();
    const std::vector<Pair> pairs = Pairs(node, "in a topology", kTopologyKeys);
    Entry entry;
    entry.at = At(node);
    if (pairs.empty() || pairs.front().key != "topology") {
      diagnostics_.Error(entry.at, "each topology must start with its name, `topology: NAME`",
                         std::string(kExample));
      return std::nullopt;
    }
    const std::optional<std::string> name = ScalarValue(pairs.front());
    if (!name || name->empty()) {
      if (name) diagnostics_.Error(At(pairs.front().value), "topology has an empty name");
      return std::nullopt;
    }
    entry.name = *name;
    // A mistyped key is reported once, not again as a missing type.
    bool ok = diagnostics_.ErrorCount() == errors_before;
    for (const Pair& pair : std::span(pairs).subspan(1)) {
      if (pair.key == "cluster_default") {
        const std::optional<bool> value = BoolValue(pair);
        ok = ok && value.has_value();
        entry.is_default = value.value_or(false);
        continue;
      }
      Kind kind = Kind::kTree;
      if (pair.key == "block") kind = Kind::kBlock;
      if (pair.key == "flat") {
        const std::optional<bool> value = BoolValue(pair);
        if (!value) {
          ok = false;
          continue;
        }
        if (!*value) continue;
        kind = Kind::kFlat;
      }
      if (entry.kind != Kind::kNone) {
        diagnostics_.Error(pair.key_at,
                           fmt::format("topology {} is both {} and {}", entry.name,
                                       KindName(entry.kind), KindName(kind)),
                           "give each topology one of tree:, block: or flat: true");
        ok = false;
        continue;
      }
      entry.kind = kind;
      entry.body = pair.value;
      entry.kind_at = pair.key_at;
    }
    if (ok && entry.kind == Kind::kNone) {
      diagnostics_.Error(entry.at, fmt::format("topology {} has no type", entry.name),
                         "add tree:, block: or flat: true");
      ok = false;
    }
    if (!ok) return std::nullopt;
    return entry;
  }

  // The one topology of `kind` that Cohort uses, or null when the file has
  // none; where there are several, the one marked cluster_default.
  const Entry* Choose(const std::vector<Entry>& entries, Kind kind) {
    std::vector<const Entry*> of_kind;
    for (const Entry& entry : entries) {
      if (entry.kind == kind) of_kind.push_back(&entry);
    }
    if (of_kind.size() <= 1) return of_kind.empty() ? nullptr : of_kind.front();
    std::vector<const Entry*> defaults;
    std::vector<std::string_view> names;
    for (const Entry* entry : of_kind) {
      if (entry->is_default) defaults.push_back(entry);
      names.push_back(entry->name);
    }
    if (defaults.size() != 1) {
      diagnostics_.Error(
          of_kind[1]->at,
          fmt::format("topology.yaml has {} {} topologies ({}); Cohort uses one for the whole "
                      "cluster",
                      of_kind.size(), KindName(kind), fmt::join(names, ", ")),
          "mark the one to use with cluster_default: true, or remove the others");
      return nullptr;
    }
    for (const Entry* entry : of_kind) {
      if (entry != defaults.front()) {
        diagnostics_.Warning(entry->at,
                             fmt::format("topology {} is not used: Cohort places with {}, the "
                                         "{} topology marked cluster_default",
                                         entry->name, defaults.front()->name, KindName(kind)),
                             "remove it, or mark it cluster_default instead");
      }
    }
    return defaults.front();
  }

  void WarnAboutFlat(const std::vector<Entry>& entries) {
    const bool placed = std::ranges::any_of(
        entries, [](const Entry& e) { return e.kind == Kind::kTree || e.kind == Kind::kBlock; });
    for (const Entry& entry : entries) {
      if (entry.kind == Kind::kFlat && entry.is_default && placed) {
        diagnostics_.Warning(entry.at,
                             fmt::format("topology {} is flat and cluster_default, but Cohort "
                                         "places every job with this file's tree and blocks",
                                         entry.name),
                             "remove the flat topology, or the tree and blocks");
      }
    }
  }

  void ReadTree(const Entry& entry, std::vector<Line>& lines) {
    if (!Expect(entry.body, YAML_MAPPING_NODE, fmt::format("tree of topology {}", entry.name))) {
      return;
    }
    const std::vector<Pair> pairs = Pairs(entry.body, "in a tree", kTreeKeys);
    const Pair* switches = Find(pairs, "switches");
    if (switches == nullptr) {
      diagnostics_.Error(entry.kind_at, fmt::format("tree {} has no switches", entry.name),
                         std::string(kExample));
      return;
    }
    ReadMembers(*switches, "switch", "SwitchName", lines);
  }

  void ReadBlock(const Entry& entry, std::vector<Line>& lines) {
    if (!Expect(entry.body, YAML_MAPPING_NODE, fmt::format("block of topology {}", entry.name))) {
      return;
    }
    const std::vector<Pair> pairs = Pairs(entry.body, "in a block topology", kBlockTopologyKeys);
    if (const Pair* sizes = Find(pairs, "block_sizes")) {
      if (std::optional<std::string> value = ListValue(*sizes)) {
        lines.push_back({{MakeWord("BlockSizes", *sizes, std::move(*value))}});
      }
    }
    const Pair* blocks = Find(pairs, "blocks");
    if (blocks == nullptr) {
      diagnostics_.Error(entry.kind_at, fmt::format("block topology {} has no blocks", entry.name),
                         "add blocks: with - block: NAME and nodes: HOSTLIST for each");
      return;
    }
    ReadMembers(*blocks, "block", "BlockName", lines);
  }

  // The list of switches or blocks, each as its topology.conf line.
  void ReadMembers(const Pair& list, std::string_view head, std::string_view conf_head,
                   std::vector<Line>& lines) {
    if (!Expect(list.value, YAML_SEQUENCE_NODE, std::string(list.key))) return;
    for (const yaml_node_item_t* item = list.value->data.sequence.items.start;
         item < list.value->data.sequence.items.top; ++item) {
      const yaml_node_t* node = Node(*item, list.value);
      if (node == nullptr || !Expect(node, YAML_MAPPING_NODE, fmt::format("each {}", head))) {
        continue;
      }
      ReadMember(node, head, std::string(conf_head), lines);
    }
  }

  // One switch (`switch:`, and `nodes:` or `children:`) or block (`block:`,
  // `nodes:`) as its topology.conf line.
  void ReadMember(const yaml_node_t* node, std::string_view head, std::string conf_head,
                  std::vector<Line>& lines) {
    const bool is_switch = head == "switch";
    const std::vector<Pair> pairs =
        is_switch ? Pairs(node, "in a switch", kSwitchKeys) : Pairs(node, "in a block", kBlockKeys);
    const Pair* name = Find(pairs, head);
    if (name == nullptr) {
      diagnostics_.Error(At(node), fmt::format("a {} has no name", head),
                         fmt::format("start it with - {}: NAME", head));
      return;
    }
    const std::optional<std::string> name_text = ScalarValue(*name);
    if (!name_text) return;
    const Pair* nodes = Find(pairs, "nodes");
    const Pair* children = Find(pairs, "children");
    if (nodes != nullptr && children != nullptr) {
      diagnostics_.Error(name->key_at,
                         fmt::format("switch {} lists both nodes: and children:", *name_text),
                         "a leaf switch lists nodes:, a switch above the leaves lists children:");
      return;
    }
    const Pair* members = nodes != nullptr ? nodes : children;
    if (members == nullptr) {
      diagnostics_.Error(
          name->key_at, fmt::format("{} {} has no members", head, *name_text),
          is_switch ? "add nodes: HOSTLIST, or children: SWITCHES" : "add nodes: HOSTLIST");
      return;
    }
    std::optional<std::string> value = ListValue(*members);
    if (!value) return;
    Line line;
    line.words.push_back(MakeWord(std::move(conf_head), *name, *name_text));
    line.words.push_back(
        MakeWord(members == nodes ? "Nodes" : "Switches", *members, std::move(*value)));
    lines.push_back(std::move(line));
  }

  std::string file_;
  Diagnostics& diagnostics_;
  yaml_document_t* document_ = nullptr;
  std::vector<bool> seen_;
};

}  // namespace

std::vector<Line> TopologyYamlLines(std::string_view text, std::string_view file,
                                    Diagnostics& diagnostics) {
  return Reader(file, diagnostics).Run(text);
}

bool IsYamlPath(std::string_view path) { return path.ends_with(".yaml") || path.ends_with(".yml"); }

}  // namespace cohort::conf
