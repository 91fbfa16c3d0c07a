// SPDX-License-Identifier: Apache-2.0
// The key tables of cohort.conf against docs/configuration.md, and the keys
// that choose the scheduler's policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "cohort/config/cluster_config.h"
#include "cohort/config/config_listing.h"
#include "test_support.h"

namespace cohort::config {
namespace {

using Names = std::vector<std::string>;

constexpr std::string_view kFile = "/etc/cohort/cohort.conf";
constexpr std::string_view kCluster = "NodeName=n1\nPartitionName=p Nodes=n1\n";

ConfigResult Parse(const std::string& text) {
  return ParseClusterConfig(text, kFile,
                            [](const std::string& path) -> absl::StatusOr<std::string> {
                              return absl::NotFoundError(path);
                            });
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

const std::map<LineKind, std::string_view>& KindNames() {
  static const std::map<LineKind, std::string_view> kNames = {
      {LineKind::kGlobal, "global"},
      {LineKind::kNode, "NodeName"},
      {LineKind::kPartition, "PartitionName"},
      {LineKind::kQos, "QOSName"},
      {LineKind::kAccount, "AccountName"}};
  return kNames;
}

// The line kind a heading or a table header names: "NodeName" or
// "`NodeName=`" is kNode; anything else is global.
LineKind KindNamedIn(std::string_view text) {
  for (const auto& [kind, name] : KindNames()) {
    if (kind != LineKind::kGlobal && Contains(text, std::string(name) + " lines")) return kind;
    if (kind != LineKind::kGlobal && Contains(text, "`" + std::string(name) + "=`")) return kind;
  }
  return LineKind::kGlobal;
}

std::vector<std::string> Cells(std::string_view row) {
  std::vector<std::string> cells;
  std::size_t start = row.find('|');
  while (start != std::string_view::npos) {
    const std::size_t end = row.find('|', start + 1);
    if (end == std::string_view::npos) break;
    cells.emplace_back(row.substr(start + 1, end - start - 1));
    start = end;
  }
  return cells;
}

std::vector<std::string> Quoted(std::string_view cell) {
  std::vector<std::string> words;
  for (std::size_t open = cell.find('`'); open != std::string_view::npos;) {
    const std::size_t close = cell.find('`', open + 1);
    if (close == std::string_view::npos) break;
    words.emplace_back(cell.substr(open + 1, close - open - 1));
    open = cell.find('`', close + 1);
  }
  return words;
}

// The keys the cohort.conf part of the docs lists, by line kind: the quoted
// words of the first cell of each table whose header starts with "key". A
// header "key (on a `QOSName=` line)" names its kind; a plain "key" takes the
// kind of its section ("### NodeName lines"), else global.
std::map<LineKind, std::set<std::string>> DocumentedKeys(const std::string& doc) {
  std::map<LineKind, std::set<std::string>> keys;
  std::string_view rest = doc;
  bool in_cohort_conf = false;
  bool in_key_table = false;
  bool after_table_row = false;
  LineKind section = LineKind::kGlobal;
  LineKind table = LineKind::kGlobal;
  while (!rest.empty()) {
    const std::size_t newline = rest.find('\n');
    const std::string_view line = rest.substr(0, newline);
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
    if (line.starts_with("## ")) in_cohort_conf = line == "## cohort.conf";
    if (line.starts_with("### ")) section = KindNamedIn(line);
    const bool table_row = line.starts_with("|");
    if (in_cohort_conf && table_row && !after_table_row) {  // a header row
      const std::vector<std::string> cells = Cells(line);
      in_key_table = !cells.empty() && Contains(cells[0], "key");
      if (in_key_table) {
        table = Contains(cells[0], "(global)") ? LineKind::kGlobal
                : Contains(cells[0], "(on ")   ? KindNamedIn(cells[0])
                                               : section;
      }
    } else if (in_cohort_conf && table_row && in_key_table && !Contains(line, "| ---")) {
      for (const std::string& key : Quoted(Cells(line).at(0))) keys[table].insert(key);
    }
    after_table_row = table_row;
  }
  return keys;
}

TEST(ConfigKeysTest, EveryKeyOfEveryTableIsDocumentedUnderItsLine) {
  const std::map<LineKind, std::set<std::string>> documented =
      DocumentedKeys(testing::ReadData("../../docs/configuration.md"));
  for (const auto& [kind, name] : KindNames()) {
    const auto it = documented.find(kind);
    ASSERT_NE(it, documented.end()) << "docs/configuration.md has no key table of " << name;
    for (const std::string_view key : KnownKeys(kind)) {
      EXPECT_TRUE(it->second.contains(std::string(key)))
          << "docs/configuration.md does not document " << key << " of " << name << " lines";
    }
  }
}

TEST(ConfigKeysTest, EveryDocumentedKeyIsInItsTable) {
  const std::map<LineKind, std::set<std::string>> documented =
      DocumentedKeys(testing::ReadData("../../docs/configuration.md"));
  for (const auto& [kind, keys] : documented) {
    const std::span<const std::string_view> known = KnownKeys(kind);
    for (const std::string& key : keys) {
      EXPECT_NE(std::find(known.begin(), known.end(), key), known.end())
          << "docs/configuration.md documents " << key << " for " << KindNames().at(kind)
          << " lines, which the parser does not know";
    }
  }
}

TEST(ConfigKeysTest, KeysAreDistinctInAnyCase) {
  for (const auto& [kind, name] : KindNames()) {
    std::set<std::string> lowered;
    for (const std::string_view key : KnownKeys(kind)) {
      std::string lower(key);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_TRUE(lowered.insert(lower).second) << key << " twice among " << name << " keys";
    }
  }
}

TEST(ConfigKeysTest, EveryKeyIsFoundInAnyCase) {
  // Each global key, written in lowercase, is a known key: no "unknown key".
  for (const std::string_view key : KnownKeys(LineKind::kGlobal)) {
    std::string lower(key);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const ConfigResult result = Parse(std::string(kCluster) + lower + "=x\n");
    for (const Diagnostic& d : result.diagnostics.All()) {
      EXPECT_FALSE(Contains(d.message, "unknown key")) << key << ": " << d.message;
    }
  }
}

// --- Scheduler policies
// -----------------------------------------------------------

TEST(ConfigPolicyChoiceTest, DefaultsWithoutAnyKey) {
  const ConfigResult result = Parse(std::string(kCluster));
  ASSERT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  const PluginChoice& plugins = result.config.plugins;
  EXPECT_EQ(plugins.queue_order, "priority/multifactor");
  EXPECT_EQ(plugins.admission, (Names{"admission/limits"}));
  EXPECT_EQ(plugins.node_filter, (Names{"filter/resources"}));
  EXPECT_EQ(plugins.node_score, "score/locality");
  EXPECT_EQ(plugins.domain_score, "domain/tightest");
}

TEST(ConfigPolicyChoiceTest, EachKeyChoosesItsSeam) {
  // The registry, not the parser, knows which names exist: any well-shaped
  // name is taken.
  const ConfigResult result = Parse(std::string(kCluster) +
                                    "PriorityType=priority/fifo\n"
                                    "admissionplugins=admission/limits,admission/quota_v2\n"
                                    "NodeFilterPlugins=filter/resources,filter/healthy-nodes\n"
                                    "NodeScoreType=score/pack NODESCORETYPE=score/spread\n"
                                    "DomainScoreType=domain/loosest.1\n");
  ASSERT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  const PluginChoice& plugins = result.config.plugins;
  EXPECT_EQ(plugins.queue_order, "priority/fifo");
  EXPECT_EQ(plugins.admission, (Names{"admission/limits", "admission/quota_v2"}));
  EXPECT_EQ(plugins.node_filter, (Names{"filter/resources", "filter/healthy-nodes"}));
  EXPECT_EQ(plugins.node_score, "score/spread");  // the later word wins
  EXPECT_EQ(plugins.domain_score, "domain/loosest.1");
}

struct ShapeError {
  std::string line;  // the third line of the file
  int column;
  std::string message;
  std::string hint_part;
};

TEST(ConfigPolicyChoiceTest, EachBadShapeIsReportedAtItsPlace) {
  const std::vector<ShapeError> cases = {
      {"PriorityType=", 14, "PriorityType is empty", "PriorityType=priority/multifactor"},
      {"PriorityType=multifactor", 14,
       "PriorityType: \"multifactor\" is not a kind/name policy name",
       "write PriorityType=priority/<name>, as PriorityType=priority/multifactor"},
      {"PriorityType=/multifactor", 14, "is not a kind/name policy name", ""},
      {"PriorityType=score/locality", 14,
       "PriorityType: \"score/locality\" is a score/ policy, not a priority/ one",
       "PriorityType chooses the queue order policy"},
      {"PriorityType=Priority/multifactor", 14, "is a Priority/ policy, not a priority/ one", ""},
      {"NodeScoreType=score/", 15, "NodeScoreType: \"score/\" has no name after the '/'",
       "NodeScoreType=score/<name>"},
      {"NodeScoreType=score/a/b", 22,
       "NodeScoreType: \"score/a/b\": '/' cannot be in a policy name", "letters, digits"},
      {"DomainScoreType=domain/a:b", 25,
       "DomainScoreType: \"domain/a:b\": ':' cannot be in a policy name", ""},
      {"DomainScoreType=filter/resources", 17, "is a filter/ policy, not a domain/ one",
       "domain score"},
      {"AdmissionPlugins=", 18, "AdmissionPlugins is empty",
       "name at least one admission policy, as AdmissionPlugins=admission/limits"},
      {"AdmissionPlugins=admission/limits,,admission/x", 35,
       "AdmissionPlugins: empty name in \"admission/limits,,admission/x\"", "single commas"},
      {"AdmissionPlugins=admission/limits,", 35, "AdmissionPlugins: empty name", ""},
      {"AdmissionPlugins=admission/limits,admission/limits", 35,
       "AdmissionPlugins: admission/limits is listed twice", "give each admission policy once"},
      {"NodeFilterPlugins=filter/resources,score/locality", 36,
       "NodeFilterPlugins: \"score/locality\" is a score/ policy, not a filter/ one",
       "node filter"},
      {"PriorityTyp=priority/fifo", 1, "unknown key \"PriorityTyp\" in cohort.conf",
       "did you mean PriorityType?"},
  };
  for (const ShapeError& c : cases) {
    const ConfigResult result = Parse(std::string(kCluster) + c.line + "\n");
    ASSERT_EQ(result.diagnostics.ErrorCount(), 1) << c.line << "\n" << result.diagnostics.Format();
    const Diagnostic& error = result.diagnostics.All().front();
    EXPECT_EQ(error.where.file, kFile) << c.line;
    EXPECT_EQ(error.where.line, 3) << c.line;
    EXPECT_EQ(error.where.column, c.column) << c.line;
    EXPECT_TRUE(Contains(error.message, c.message)) << c.line << ": " << error.message;
    EXPECT_TRUE(Contains(error.hint, c.hint_part)) << c.line << ": " << error.hint;
  }
}

TEST(ConfigPolicyChoiceTest, ABadValueKeepsTheDefault) {
  const ConfigResult result =
      Parse(std::string(kCluster) + "PriorityType=fifo NodeFilterPlugins=filter/a,filter/a\n");
  EXPECT_EQ(result.diagnostics.ErrorCount(), 2) << result.diagnostics.Format();
  EXPECT_EQ(result.config.plugins.queue_order, "priority/multifactor");
  EXPECT_EQ(result.config.plugins.node_filter, (Names{"filter/resources"}));
}

TEST(ConfigPolicyChoiceTest, EveryBadItemOfAListIsReported) {
  const ConfigResult result =
      Parse(std::string(kCluster) + "AdmissionPlugins=limits,admission/a,score/b,admission/a\n");
  ASSERT_EQ(result.diagnostics.ErrorCount(), 3) << result.diagnostics.Format();
  EXPECT_EQ(result.diagnostics.All()[0].where.column, 18);
  EXPECT_EQ(result.diagnostics.All()[1].where.column, 37);
  EXPECT_EQ(result.diagnostics.All()[2].where.column, 45);
  EXPECT_EQ(result.config.plugins.admission, (Names{"admission/limits"}));
}

}  // namespace
}  // namespace cohort::config

namespace cohort::config {
namespace {

// scontrol show config: the settings of a parsed file, sorted, by Slurm's
// names where slurm.conf has the setting.
TEST(ConfigListingTest, ListsTheSettingsInForceBySlurmsNames) {
  const ConfigResult parsed = ParseClusterConfig(
      "ClusterName=lab\nNodeTimeout=45\nKillWait=7\nPreemptMode=REQUEUE\n"
      "PriorityDecayHalfLife=2-12\nMpiDefault=pmix\nNodeName=n1\nPartitionName=p Nodes=n1\n",
      "/etc/cohort/cohort.conf", [](const std::string& path) -> absl::StatusOr<std::string> {
        return absl::NotFoundError(path);
      });
  ASSERT_FALSE(parsed.diagnostics.HasErrors());
  const std::vector<ConfigLine> lines = ListConfig(parsed.config, 300);
  std::map<std::string, std::string> by_name;
  for (const ConfigLine& line : lines) by_name[line.name] = line.value;
  EXPECT_EQ(by_name.size(), lines.size()) << "each name once";
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  EXPECT_EQ(by_name["ClusterName"], "lab");
  EXPECT_EQ(by_name["SlurmdTimeout"], "45 sec");
  EXPECT_EQ(by_name["KillWait"], "7 sec");
  EXPECT_EQ(by_name["MinJobAge"], "300 sec");
  EXPECT_EQ(by_name["PreemptMode"], "REQUEUE");
  EXPECT_EQ(by_name["PriorityDecayHalfLife"], "2-12:00:00");
  EXPECT_EQ(by_name["MpiDefault"], "pmix");
  EXPECT_EQ(by_name["Prolog"], "(null)");
  EXPECT_FALSE(by_name.contains("NodeTimeout")) << "listed by Slurm's name alone";
}

}  // namespace
}  // namespace cohort::config
