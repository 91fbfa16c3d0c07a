// SPDX-License-Identifier: Apache-2.0
#include "cohort/config/cluster_config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "test_support.h"

namespace cohort::config {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using Names = std::vector<std::string>;

constexpr std::string_view kFile = "/etc/cohort/cohort.conf";

// Serves `files` by absolute path, as the shell's loader serves the disk.
FileLoader MapLoader(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> absl::StatusOr<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError("no such file");
    return it->second;
  };
}

ConfigResult Parse(std::string_view text, std::map<std::string, std::string> files = {}) {
  return ParseClusterConfig(text, kFile, MapLoader(std::move(files)));
}

// Parses text that must be clean: no errors, no warnings.
ClusterConfig MustParse(std::string_view text, std::map<std::string, std::string> files = {}) {
  ConfigResult result = Parse(text, std::move(files));
  EXPECT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  return result.config;
}

std::vector<Diagnostic> Errors(const ConfigResult& result) {
  std::vector<Diagnostic> errors;
  for (const Diagnostic& d : result.diagnostics.All()) {
    if (d.severity == Severity::kError) errors.push_back(d);
  }
  return errors;
}

// The only error of `text`; fails the test unless there is exactly one.
Diagnostic OnlyError(std::string_view text, std::map<std::string, std::string> files = {}) {
  const ConfigResult result = Parse(text, std::move(files));
  const std::vector<Diagnostic> errors = Errors(result);
  EXPECT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  return errors.empty() ? Diagnostic{} : errors.front();
}

Names NodeNames(const ClusterConfig& config) {
  Names names;
  for (const NodeSpec& node : config.nodes) names.push_back(node.name);
  return names;
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// --- A full file
// ---------------------------------------------------------------

constexpr std::string_view kFullConfig = R"(# A small cluster
ClusterName=alpha
ControllerAddr=10.0.0.1
ControllerPort=7000
StateDir=/var/spool/cohort
AuthKeyFile=keys/cohort.key
TopologyFile=topology.conf
NodeTimeout=120
KillWait=10
NodeName=DEFAULT CPUs=64 MemoryMB=512000 Gpus=8
NodeName=gpu[001-004] Features=h100,ib
NodeName=cpu[1-2] CPUs=128 Gpus=0 MemoryMB=256000
PartitionName=DEFAULT MaxTime=1-00:00:00 PriorityTier=2
PartitionName=gpu Nodes=gpu[001-004] Default=YES DefaultTime=1:00:00 MaxNodes=4 AllowAccounts=ml,vision
PartitionName=any Nodes=ALL MaxTime=UNLIMITED PriorityTier=1
)";

TEST(ClusterConfigTest, FullFileGlobals) {
  const ClusterConfig config = MustParse(kFullConfig);
  EXPECT_EQ(config.cluster_name, "alpha");
  EXPECT_EQ(config.controller_addr, "10.0.0.1");
  EXPECT_EQ(config.controller_port, 7000);
  EXPECT_EQ(config.state_dir, "/var/spool/cohort");
  EXPECT_EQ(config.auth_key_file, "/etc/cohort/keys/cohort.key");
  EXPECT_EQ(config.topology_file, "/etc/cohort/topology.conf");
  EXPECT_EQ(config.node_timeout, seconds(120));
  EXPECT_EQ(config.kill_wait, seconds(10));
  EXPECT_EQ(MustParse("NodeName=n1\nPartitionName=p Nodes=ALL\nMpiDefault=PMIx_v4\n").mpi_default,
            "pmix");
  const ClusterConfig containers = MustParse(
      "NodeName=n1\nPartitionName=p Nodes=ALL\nContainerCacheDir=/var/lib/cohort/images\n"
      "ContainerCacheMaxGB=200\nContainerRegistryCAFile=/etc/ssl/site.pem\n"
      "ContainerCredentialsFile=/etc/cohort/credentials\nContainerPullAhead=2:30:00\n"
      "ContainerRegistryMirrors=nvcr.io=https://m1:5000,registry-1.docker.io=http://m2\n");
  EXPECT_EQ(containers.container_pull_ahead, std::chrono::minutes(150));
  EXPECT_EQ(containers.container_runtime, "builtin");
  EXPECT_EQ(MustParse("NodeName=n1\nPartitionName=p Nodes=ALL\nContainerRuntime=None\n")
                .container_runtime,
            "none");
  EXPECT_EQ(MustParse("NodeName=n1\nPartitionName=p Nodes=ALL\n").container_pull_ahead,
            std::chrono::hours(1));
  EXPECT_EQ(MustParse("NodeName=n1\nPartitionName=p Nodes=ALL\nContainerPullAhead=0\n")
                .container_pull_ahead.count(),
            0);
  EXPECT_EQ(containers.container_cache_dir, "/var/lib/cohort/images");
  EXPECT_EQ(containers.container_cache_max_gb, 200);
  EXPECT_EQ(containers.container_registry_ca_file, "/etc/ssl/site.pem");
  EXPECT_EQ(containers.container_credentials_file, "/etc/cohort/credentials");
  EXPECT_EQ(
      containers.container_registry_mirrors,
      (std::vector<std::string>{"nvcr.io=https://m1:5000", "registry-1.docker.io=http://m2"}));
}

TEST(ClusterConfigTest, FullFileNodesTakeDefaultsAndOwnValues) {
  const ClusterConfig config = MustParse(kFullConfig);
  EXPECT_EQ(NodeNames(config), (Names{"gpu001", "gpu002", "gpu003", "gpu004", "cpu1", "cpu2"}));
  const NodeSpec& gpu = config.nodes[2];
  EXPECT_EQ(gpu.cpus, 64);
  EXPECT_EQ(gpu.memory_mb, 512000);
  EXPECT_EQ(gpu.gpus, 8);
  EXPECT_EQ(gpu.features, (Names{"h100", "ib"}));
  EXPECT_EQ(gpu.defined_at.file, kFile);
  EXPECT_EQ(gpu.defined_at.line, 11);
  const NodeSpec& cpu = config.nodes[5];
  EXPECT_EQ(cpu.cpus, 128);
  EXPECT_EQ(cpu.memory_mb, 256000);
  EXPECT_EQ(cpu.gpus, 0);
  EXPECT_TRUE(cpu.features.empty());
}

TEST(ClusterConfigTest, FullFilePartitions) {
  const ClusterConfig config = MustParse(kFullConfig);
  ASSERT_EQ(config.partitions.size(), 2U);
  const PartitionSpec& gpu = config.partitions[0];
  EXPECT_EQ(gpu.name, "gpu");
  EXPECT_EQ(gpu.nodes, (Names{"gpu001", "gpu002", "gpu003", "gpu004"}));
  EXPECT_TRUE(gpu.is_default);
  EXPECT_EQ(gpu.max_time, days(1));  // from PartitionName=DEFAULT
  EXPECT_EQ(gpu.default_time, hours(1));
  EXPECT_EQ(gpu.max_nodes, 4);
  EXPECT_EQ(gpu.priority_tier, 2);
  EXPECT_EQ(gpu.allow_accounts, (Names{"ml", "vision"}));
  EXPECT_EQ(gpu.defined_at.line, 14);

  const PartitionSpec& any = config.partitions[1];
  EXPECT_EQ(any.name, "any");
  EXPECT_EQ(any.nodes, NodeNames(config));  // Nodes=ALL, in configuration order
  EXPECT_FALSE(any.is_default);
  EXPECT_EQ(any.max_time, kUnlimited);
  EXPECT_FALSE(any.default_time.has_value());
  EXPECT_FALSE(any.max_nodes.has_value());
  EXPECT_EQ(any.priority_tier, 1);
  EXPECT_TRUE(any.allow_accounts.empty());
}

TEST(ClusterConfigTest, UnsetGlobalsKeepTheirDefaults) {
  const ClusterConfig config = MustParse("NodeName=n1\nPartitionName=p Nodes=n1\n");
  const ClusterConfig defaults;
  EXPECT_EQ(config.cluster_name, defaults.cluster_name);
  EXPECT_EQ(config.controller_port, defaults.controller_port);
  EXPECT_EQ(config.state_dir, defaults.state_dir);
  EXPECT_TRUE(config.topology_file.empty());
  EXPECT_EQ(config.node_timeout, seconds(300));
  EXPECT_EQ(config.kill_wait, seconds(30));
  EXPECT_EQ(config.mpi_default, "none");
  ASSERT_EQ(config.nodes.size(), 1U);
  EXPECT_EQ(config.nodes[0].cpus, 1);
  EXPECT_EQ(config.nodes[0].gpus, 0);
}

TEST(ClusterConfigTest, NodeDefaultsApplyToLaterLinesOnly) {
  const ClusterConfig config = MustParse(
      "NodeName=a1 Gpus=2\n"
      "NodeName=DEFAULT Gpus=4 CPUs=32\n"
      "NodeName=b1\n"
      "NodeName=default Gpus=8\n"
      "NodeName=c1 RealMemory=1000\n"
      "PartitionName=p Nodes=ALL\n");
  ASSERT_EQ(NodeNames(config), (Names{"a1", "b1", "c1"}));
  EXPECT_EQ(config.nodes[0].gpus, 2);
  EXPECT_EQ(config.nodes[0].cpus, 1);
  EXPECT_EQ(config.nodes[1].gpus, 4);
  EXPECT_EQ(config.nodes[1].cpus, 32);
  EXPECT_EQ(config.nodes[2].gpus, 8);
  EXPECT_EQ(config.nodes[2].cpus, 32);
  EXPECT_EQ(config.nodes[2].memory_mb, 1000);
}

TEST(ClusterConfigTest, PartitionDefaultsIncludingNodesAll) {
  const ClusterConfig config = MustParse(
      "NodeName=n[1-3]\n"
      "PartitionName=DEFAULT Nodes=ALL MaxTime=2:00:00 MaxNodes=2\n"
      "PartitionName=short Default=YES\n"
      "PartitionName=long MaxTime=UNLIMITED MaxNodes=UNLIMITED "
      "AllowAccounts=ALL\n"
      "PartitionName=two Nodes=n[1-2]\n");
  ASSERT_EQ(config.partitions.size(), 3U);
  EXPECT_EQ(config.partitions[0].nodes, (Names{"n1", "n2", "n3"}));
  EXPECT_EQ(config.partitions[0].max_time, hours(2));
  EXPECT_EQ(config.partitions[0].max_nodes, 2);
  EXPECT_EQ(config.partitions[1].nodes, (Names{"n1", "n2", "n3"}));
  EXPECT_EQ(config.partitions[1].max_time, kUnlimited);
  EXPECT_FALSE(config.partitions[1].max_nodes.has_value());
  EXPECT_EQ(config.partitions[2].nodes, (Names{"n1", "n2"}));
}

// --- Syntax
// ----------------------------------------------------------------------

TEST(ClusterConfigTest, KeysAreCaseInsensitive) {
  const ClusterConfig config = MustParse(
      "clustername=lab\n"
      "nodename=n[1-2] cpus=8 GPUS=2 memorymb=1000 features=fast\n"
      "partitionname=p nodes=all default=yes maxtime=60 priorityTIER=3\n");
  EXPECT_EQ(config.cluster_name, "lab");
  ASSERT_EQ(config.nodes.size(), 2U);
  EXPECT_EQ(config.nodes[1].cpus, 8);
  EXPECT_EQ(config.nodes[1].gpus, 2);
  EXPECT_EQ(config.nodes[1].memory_mb, 1000);
  EXPECT_EQ(config.nodes[1].features, (Names{"fast"}));
  ASSERT_EQ(config.partitions.size(), 1U);
  EXPECT_EQ(config.partitions[0].nodes.size(), 2U);
  EXPECT_TRUE(config.partitions[0].is_default);
  EXPECT_EQ(config.partitions[0].max_time, minutes(60));
  EXPECT_EQ(config.partitions[0].priority_tier, 3);
}

TEST(ClusterConfigTest, CommentsAnywhere) {
  const ClusterConfig config = MustParse(
      "# a whole-line comment\n"
      "   # an indented one\n"
      "ClusterName=lab# no space needed\n"
      "NodeName=n1 CPUs=4 # Gpus=8 is commented out\n"
      "PartitionName=p Nodes=ALL\n");
  EXPECT_EQ(config.cluster_name, "lab");
  ASSERT_EQ(config.nodes.size(), 1U);
  EXPECT_EQ(config.nodes[0].cpus, 4);
  EXPECT_EQ(config.nodes[0].gpus, 0);
}

TEST(ClusterConfigTest, BackslashContinuesTheLine) {
  const ClusterConfig config = MustParse(
      "NodeName=n[1-2] \\\n"
      "    CPUs=16 \\  \n"
      "    Gpus=4\n"
      "PartitionName=p Nodes=ALL\n");
  ASSERT_EQ(config.nodes.size(), 2U);
  EXPECT_EQ(config.nodes[0].cpus, 16);
  EXPECT_EQ(config.nodes[0].gpus, 4);
}

TEST(ClusterConfigTest, ErrorOnAContinuationLineHasItsOwnPosition) {
  const Diagnostic error = OnlyError(
      "NodeName=n1\n"
      "NodeName=n2 \\\n"
      "    Gpus=x\n");
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.where.column, 10);
}

TEST(ClusterConfigTest, QuotedValues) {
  const ClusterConfig config = MustParse(
      "ClusterName=\"my # cluster\"\n"
      "StateDir=\"/var/lib/co hort\"\n"
      "NodeName=n1 Features=\"a,b\"\n"
      "PartitionName=p Nodes=ALL\n");
  EXPECT_EQ(config.cluster_name, "my # cluster");
  EXPECT_EQ(config.state_dir, "/var/lib/co hort");
  ASSERT_EQ(config.nodes.size(), 1U);
  EXPECT_EQ(config.nodes[0].features, (Names{"a", "b"}));
}

TEST(ClusterConfigTest, FeaturesDropEmptyItems) {
  const ClusterConfig config = MustParse("NodeName=n1 Features=a,,b,\nPartitionName=p Nodes=n1\n");
  ASSERT_EQ(config.nodes.size(), 1U);
  EXPECT_EQ(config.nodes[0].features, (Names{"a", "b"}));
}

// --- Include
// -----------------------------------------------------------------------

TEST(ClusterConfigTest, IncludeIsRelativeToTheIncludingFile) {
  const ClusterConfig config = MustParse(
      "Include=conf.d/nodes.conf\n"
      "PartitionName=p Nodes=ALL\n",
      {{"/etc/cohort/conf.d/nodes.conf", "NodeName=a[1-2]\nInclude=more.conf\n"},
       {"/etc/cohort/conf.d/more.conf", "NodeName=b1\nTopologyFile=topology.conf\n"}});
  EXPECT_EQ(NodeNames(config), (Names{"a1", "a2", "b1"}));
  EXPECT_EQ(config.nodes[2].defined_at.file, "/etc/cohort/conf.d/more.conf");
  EXPECT_EQ(config.nodes[2].defined_at.line, 1);
  EXPECT_EQ(config.topology_file, "/etc/cohort/conf.d/topology.conf");
}

TEST(ClusterConfigTest, IncludeOfAnAbsolutePath) {
  const ClusterConfig config = MustParse("Include=/srv/nodes.conf\nPartitionName=p Nodes=ALL\n",
                                         {{"/srv/nodes.conf", "NodeName=n1"}});
  EXPECT_EQ(NodeNames(config), (Names{"n1"}));
}

TEST(ClusterConfigTest, ErrorsInAnIncludedFileNameThatFile) {
  const Diagnostic error = OnlyError("NodeName=n1\nInclude=nodes.conf\n",
                                     {{"/etc/cohort/nodes.conf", "# nodes\nNodeName=n2 CPUs=0\n"}});
  EXPECT_EQ(error.where.file, "/etc/cohort/nodes.conf");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 18);
}

TEST(ClusterConfigTest, MissingInclude) {
  const Diagnostic error = OnlyError("NodeName=n1\nInclude=missing.conf\n");
  EXPECT_EQ(error.where.file, kFile);
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 9);
  EXPECT_EQ(error.message, "cannot include \"/etc/cohort/missing.conf\": no such file");
  EXPECT_EQ(error.hint, "paths are relative to the including file");
}

// --- What the CLI reads
// -----------------------------------------------------------------------

TEST(ClusterConfigTest, ClientSettingsAreTheFullParsesStateDirAndKey) {
  const std::map<std::string, std::string> files = {
      {"/etc/cohort/conf.d/nodes.conf", "NodeName=a[1-2]\nInclude=more.conf\n"},
      {"/etc/cohort/conf.d/more.conf", "StateDir=/srv/cohort\nAuthKeyFile=keys/cluster.key\n"}};
  const std::string text =
      "StateDir=/var/tmp\nInclude=conf.d/nodes.conf\nPartitionName=p Nodes=ALL\n";
  const ClusterConfig full = MustParse(text, files);
  const ClientSettings settings = ReadClientSettings(text, kFile, MapLoader(files));
  EXPECT_EQ(settings.state_dir, "/srv/cohort");  // the later line wins, as in the full parse
  EXPECT_EQ(settings.state_dir, full.state_dir);
  EXPECT_EQ(settings.auth_key_file, "/etc/cohort/conf.d/keys/cluster.key");
  EXPECT_EQ(settings.auth_key_file, full.auth_key_file);
}

TEST(ClusterConfigTest, ClientSettingsPassOverNodesAndErrorsAndKeepDefaults) {
  // Lines the daemons would refuse, an include loop and a missing include:
  // none of them is the CLI's to report, and StateDir is still found.
  const std::string text =
      "NodeName=gpu[1-x] CPUs=0\nInclude=self.conf\nInclude=missing.conf\nStateDir=/run/c\n";
  const std::string self = "/etc/cohort/self.conf";
  const ClientSettings settings = ReadClientSettings(text, self, MapLoader({{self, text}}));
  EXPECT_EQ(settings.state_dir, "/run/c");
  EXPECT_EQ(settings.auth_key_file, ClusterConfig().auth_key_file);
  const ClientSettings empty = ReadClientSettings("", kFile, MapLoader({}));
  EXPECT_EQ(empty.state_dir, ClusterConfig().state_dir);
}

TEST(ClusterConfigTest, AnIncludeLoopIsReportedOnce) {
  const ConfigResult result =
      Parse("NodeName=n1\nInclude=loop.conf\n",
            {{"/etc/cohort/loop.conf", "NodeName=n2\nInclude=loop.conf\n"}});
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  EXPECT_EQ(errors[0].where.file, "/etc/cohort/loop.conf");
  EXPECT_EQ(errors[0].where.line, 2);
  EXPECT_EQ(errors[0].where.column, 9);
  EXPECT_EQ(errors[0].message, "\"/etc/cohort/loop.conf\" includes itself");
  EXPECT_EQ(NodeNames(result.config), (Names{"n1", "n2"}));  // the rest still parsed
}

TEST(ClusterConfigTest, DeepIncludesStopAtTheDepthLimit) {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 10; ++i) {
    files[fmt::format("/etc/cohort/{}.conf", i)] = fmt::format("Include={}.conf\n", i + 1);
  }
  const ConfigResult result = Parse("NodeName=n1\nInclude=0.conf\n", files);
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  EXPECT_EQ(errors[0].message, "includes nest deeper than 8 files");
}

// --- Errors, located
// -------------------------------------------------------------

TEST(ClusterConfigErrorTest, UnknownNodeKeySuggestsTheNearest) {
  const Diagnostic error = OnlyError("NodeName=n1\nNodeName=n2 Gpu=8\n");
  EXPECT_EQ(error.where.file, kFile);
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 13);
  EXPECT_EQ(error.message, "unknown key \"Gpu\" in a NodeName line");
  EXPECT_EQ(error.hint, "did you mean Gpus?");
}

TEST(ClusterConfigErrorTest, UnknownGlobalKeyAtLineStartSuggestsTheNearest) {
  const Diagnostic error = OnlyError("NodeName=n1\nPartitionNmae=batch\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 1);
  EXPECT_TRUE(Contains(error.message, "PartitionNmae")) << error.message;
  EXPECT_TRUE(Contains(error.hint, "PartitionName")) << error.hint;
}

TEST(ClusterConfigErrorTest, UnknownKeyAtLineStartIsReportedOnce) {
  // The words after a mistyped line key are its arguments, not more errors.
  const Diagnostic error = OnlyError("NodeName=n1\nPartitionNmae=batch Nodes=ALL Default=YES\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 1);
  EXPECT_EQ(error.hint, "did you mean PartitionName?");
}

TEST(ClusterConfigErrorTest, LineKeyInTheMiddleOfALine) {
  const Diagnostic error = OnlyError("NodeName=n1\nClusterName=c NodeName=n2\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 15);
  EXPECT_EQ(error.message, "NodeName= must start its line");
  EXPECT_EQ(error.hint, "move NodeName=n2 to a line of its own");
}

TEST(ClusterConfigErrorTest, UnknownPartitionKey) {
  const Diagnostic error = OnlyError("NodeName=n1\nPartitionName=p Nodes=ALL MaxTme=60\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 27);
  EXPECT_EQ(error.message, "unknown key \"MaxTme\" in a PartitionName line");
  EXPECT_EQ(error.hint, "did you mean MaxTime?");
}

TEST(ClusterConfigErrorTest, FarFromAnyKeyListsTheKnownOnes) {
  const Diagnostic error = OnlyError("NodeName=n0\nNodeName=n1 Colour=blue\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 13);
  EXPECT_TRUE(Contains(error.hint, "known keys: CPUs, MemoryMB")) << error.hint;
}

TEST(ClusterConfigErrorTest, BadInteger) {
  const Diagnostic error = OnlyError("NodeName=n1\nNodeName=n2 CPUs=many\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 18);
  EXPECT_EQ(error.message, "CPUs must be a positive integer, found \"many\"");
  EXPECT_EQ(error.hint, "write CPUs=<number>");
}

TEST(ClusterConfigTest, UsageIsSampledAsOftenAsJobAcctGatherFrequencySays) {
  const std::string node = "NodeName=n1\nPartitionName=p Nodes=ALL Default=YES\n";
  EXPECT_EQ(MustParse(node).job_acct_gather_frequency, std::chrono::seconds(30));
  EXPECT_EQ(MustParse(node + "JobAcctGatherFrequency=task=5\n").job_acct_gather_frequency,
            std::chrono::seconds(5));
  EXPECT_EQ(MustParse(node + "JobAcctGatherFrequency=0\n").job_acct_gather_frequency,
            std::chrono::seconds(0));
  EXPECT_EQ(MustParse(node + "MetricsJobSeries=7\n").metrics_job_series, 7);
  for (const char* bad : {"energy=30", "task=", "-1", "86401", "30s", "task=5,energy=0"}) {
    const Diagnostic error =
        OnlyError(fmt::format("NodeName=n1\nJobAcctGatherFrequency={}\n", bad));
    EXPECT_EQ(error.message, fmt::format("JobAcctGatherFrequency={} is no sample period", bad));
    EXPECT_NE(error.hint.find("task=30"), std::string::npos);
  }
}

TEST(ClusterConfigErrorTest, IntegerRanges) {
  EXPECT_EQ(OnlyError("NodeName=n1\nMpiDefault=pmi3\n").message, "MpiDefault=pmi3 is no MPI type");
  EXPECT_EQ(OnlyError("NodeName=n1\nContainerRegistryMirrors=nvcr.io=ftp://m\n").message,
            "ContainerRegistryMirrors: \"nvcr.io=ftp://m\" is not REGISTRY=URL");
  EXPECT_EQ(OnlyError("NodeName=n1\nKillWait=-1\n").message,
            "KillWait must be a non-negative integer, found \"-1\"");
  EXPECT_EQ(OnlyError("NodeName=n1\nNodeTimeout=0\n").message,
            "NodeTimeout must be a positive integer, found \"0\"");
  EXPECT_EQ(OnlyError("NodeName=n1\nControllerPort=70000\n").message,
            "ControllerPort 70000 is not a TCP port");
  EXPECT_EQ(OnlyError("NodeName=n1\nRequeueBackoff=9223372036854775807\n").message,
            "RequeueBackoff=9223372036854775807 is more than a day");
  EXPECT_EQ(OnlyError("NodeName=n1\nMaxBatchRequeue=10001\n").message.substr(0, 15),
            "MaxBatchRequeue");
  EXPECT_EQ(OnlyError("NodeName=n1\nNodeName=n2 Gpus=65\n").message,
            "Gpus=65 is more than 64 per node");
  EXPECT_EQ(OnlyError("NodeName=n1\nPartitionName=p Nodes=ALL Default=maybe\n").message,
            "Default must be YES or NO, found \"maybe\"");
}

TEST(ClusterConfigErrorTest, BadGpusAfterAnotherNumberIsOneError) {
  // The GPU range check must not judge the number left over from MemoryMB=.
  const Diagnostic error = OnlyError("NodeName=n1\nNodeName=n2 MemoryMB=512000 Gpus=x\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 34);
  EXPECT_EQ(error.message, "Gpus must be a non-negative integer, found \"x\"");
}

TEST(ClusterConfigErrorTest, BadTime) {
  const Diagnostic error = OnlyError("NodeName=n1\nPartitionName=p Nodes=ALL MaxTime=1:2:3:4\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 35);
  EXPECT_TRUE(Contains(error.message, "MaxTime: time \"1:2:3:4\"")) << error.message;
  EXPECT_TRUE(Contains(error.message, "D-HH:MM:SS")) << error.message;
  EXPECT_EQ(error.hint, "for example MaxTime=2-00:00:00");
}

TEST(ClusterConfigErrorTest, BadHostlistPointsAtTheFaultyCharacter) {
  // gpu[3-1]: the range starts at the 5th character of the value.
  const Diagnostic backwards = OnlyError("NodeName=n1\nNodeName=gpu[3-1] CPUs=4\n");
  EXPECT_EQ(backwards.where.line, 2);
  EXPECT_EQ(backwards.where.column, 14);
  EXPECT_TRUE(Contains(backwards.message, "runs backwards")) << backwards.message;
  EXPECT_EQ(backwards.hint, "hostlists look like gpu[001-064] or a[1,3,5-7],b2");

  // n[1-2]]: the stray ']' is the 7th character of Nodes=.
  const Diagnostic stray = OnlyError("NodeName=n[1-2]\nPartitionName=p Nodes=n[1-2]]\n");
  EXPECT_EQ(stray.where.line, 2);
  EXPECT_EQ(stray.where.column, 23 + 6);
  EXPECT_TRUE(Contains(stray.message, "Nodes: hostlist")) << stray.message;
}

TEST(ClusterConfigErrorTest, NodeDefinedTwice) {
  const ConfigResult result = Parse("NodeName=n[1-4]\nNodeName=n[3-5] Gpus=8\n");
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 2U) << result.diagnostics.Format();
  EXPECT_EQ(errors[0].where.line, 2);
  EXPECT_EQ(errors[0].where.column, 10);
  EXPECT_EQ(errors[0].message, "node n3 is defined twice (first at line 1)");
  EXPECT_EQ(errors[1].message, "node n4 is defined twice (first at line 1)");
  EXPECT_EQ(NodeNames(result.config), (Names{"n1", "n2", "n3", "n4", "n5"}));
  EXPECT_EQ(result.config.nodes[2].gpus, 0);  // the first definition stands
}

TEST(ClusterConfigErrorTest, PartitionNamingUnknownNodes) {
  const Diagnostic error = OnlyError("NodeName=n[1-2]\nPartitionName=p Nodes=n[1-4]\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 23);
  EXPECT_EQ(error.message, "partition p names nodes with no NodeName line: n[3-4]");
}

TEST(ClusterConfigErrorTest, TwoDefaultPartitions) {
  const Diagnostic error = OnlyError(
      "NodeName=n1\n"
      "PartitionName=a Nodes=ALL Default=YES\n"
      "PartitionName=b Nodes=ALL Default=YES\n");
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.where.column, 1);
  EXPECT_EQ(error.message, "partitions a and b are both Default=YES");
}

TEST(ClusterConfigTest, PartitionStateIsUpUnlessSaid) {
  const ConfigResult result = Parse(
      "NodeName=n1\nPartitionName=a Nodes=ALL\nPartitionName=b Nodes=ALL State=drain\n"
      "PartitionName=c Nodes=ALL State=INACTIVE\n");
  ASSERT_FALSE(result.diagnostics.HasErrors()) << result.diagnostics.Format();
  EXPECT_EQ(result.config.partitions[0].state, PartitionState::kUp);
  EXPECT_EQ(result.config.partitions[1].state, PartitionState::kDrain);
  EXPECT_EQ(result.config.partitions[2].state, PartitionState::kInactive);
}

TEST(ClusterConfigErrorTest, PartitionStateNamesTheStates) {
  const Diagnostic error = OnlyError("NodeName=n1\nPartitionName=p Nodes=ALL State=CLOSED\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 33);
  EXPECT_EQ(error.message, "State=CLOSED: not a partition state");
  EXPECT_NE(error.hint.find("UP (takes and starts jobs)"), std::string::npos) << error.hint;
}

TEST(ClusterConfigErrorTest, PartitionDefinedTwice) {
  const Diagnostic error =
      OnlyError("NodeName=n1\nPartitionName=p Nodes=ALL\nPartitionName=p Nodes=n1\n");
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.message, "partition p is defined twice (first at line 2)");
}

TEST(ClusterConfigErrorTest, DefaultTimeAboveMaxTime) {
  const Diagnostic error = OnlyError(
      "NodeName=n1\nPartitionName=p Nodes=ALL "
      "MaxTime=1:00:00 DefaultTime=2:00:00\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 1);
  EXPECT_EQ(error.message, "partition p has DefaultTime 02:00:00 above its MaxTime 01:00:00");
}

TEST(ClusterConfigErrorTest, WordWithoutEquals) {
  const ConfigResult result = Parse("NodeName=n1 Gpus8\n");
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  EXPECT_EQ(errors[0].where.line, 1);
  EXPECT_EQ(errors[0].where.column, 13);
  EXPECT_EQ(errors[0].message, "expected Key=Value, found \"Gpus8\"");
  EXPECT_EQ(NodeNames(result.config), (Names{"n1"}));  // the rest of the line stands
}

TEST(ClusterConfigErrorTest, MissingKey) {
  const Diagnostic error = OnlyError("NodeName=n1\n  =5\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 3);
  EXPECT_EQ(error.message, "missing key before '='");
}

TEST(ClusterConfigErrorTest, UnterminatedQuote) {
  const ConfigResult result = Parse("ClusterName=\"lab\nNodeName=n1\n");
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  EXPECT_EQ(errors[0].where.line, 1);
  EXPECT_EQ(errors[0].where.column, 13);
  EXPECT_EQ(errors[0].message, "unterminated quote");
  EXPECT_EQ(NodeNames(result.config), (Names{"n1"}));  // the next line is still read
}

TEST(ClusterConfigErrorTest, NoNodesAtAll) {
  const ConfigResult result = Parse("# empty\nClusterName=lab\n");
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  EXPECT_EQ(errors[0].message, "no nodes are defined");
  EXPECT_EQ(errors[0].where.line, 0);
  EXPECT_EQ(result.diagnostics.All().size(), 1U);  // and no implicit partition
  EXPECT_TRUE(result.config.partitions.empty());
}

TEST(ClusterConfigErrorTest, EveryErrorOfTheFileIsReported) {
  const ConfigResult result = Parse(
      "ClusterName=lab\n"                            // 1
      "NodeName=n[1-4] CPUs=abc\n"                   // 2 bad integer
      "NodeName=m[1-2] Gpu=8\n"                      // 3 unknown key
      "NodeName=k[1-2]\n"                            // 4
      "NodeName=k2\n"                                // 5 defined twice
      "Bogus\n"                                      // 6 no '='
      "PartitionName=a Nodes=k[1-2] MaxTime=soon\n"  // 7 bad time
      "PartitionName=b Nodes=k[1-3] Default=YES\n"   // 8 unknown node
      "PartitionName=c Nodes=ALL Default=YES\n"      // 9 second default
      "ControllerPort=http\n");                      // 10 bad integer
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 8U) << result.diagnostics.Format();
  std::vector<int> lines;
  for (const Diagnostic& error : errors) lines.push_back(error.where.line);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(result.diagnostics.ErrorCount(), 8);
  EXPECT_TRUE(result.diagnostics.HasErrors());
}

TEST(ClusterConfigErrorTest, FormatShowsFileLineAndColumn) {
  const ConfigResult result = Parse("NodeName=n1\nNodeName=n2 Gpu=8\n");
  EXPECT_TRUE(Contains(result.diagnostics.Format(),
                       "/etc/cohort/cohort.conf:2:13: error: unknown key \"Gpu\" in a NodeName "
                       "line\n  hint: did you mean Gpus?\n"))
      << result.diagnostics.Format();
}

// --- Partitions
// ------------------------------------------------------------------

TEST(ClusterConfigTest, NoPartitionLineMakesAnImplicitOne) {
  const ConfigResult result = Parse("NodeName=n[1-3]\n");
  EXPECT_FALSE(result.diagnostics.HasErrors()) << result.diagnostics.Format();
  ASSERT_EQ(result.diagnostics.All().size(), 1U);
  const Diagnostic& warning = result.diagnostics.All()[0];
  EXPECT_EQ(warning.severity, Severity::kWarning);
  EXPECT_TRUE(Contains(warning.message, "partition \"all\"")) << warning.message;
  ASSERT_EQ(result.config.partitions.size(), 1U);
  const PartitionSpec& all = result.config.partitions[0];
  EXPECT_EQ(all.name, "all");
  EXPECT_TRUE(all.is_default);
  EXPECT_EQ(all.nodes, (Names{"n1", "n2", "n3"}));
  EXPECT_EQ(result.config.DefaultPartition(), &all);
}

TEST(ClusterConfigTest, DefaultPartitionIsTheMarkedOneElseTheFirst) {
  const ClusterConfig marked = MustParse(
      "NodeName=n1\nPartitionName=a Nodes=ALL\nPartitionName=b "
      "Nodes=ALL Default=YES\n");
  ASSERT_NE(marked.DefaultPartition(), nullptr);
  EXPECT_EQ(marked.DefaultPartition()->name, "b");

  const ClusterConfig unmarked =
      MustParse("NodeName=n1\nPartitionName=a Nodes=ALL\nPartitionName=b Nodes=ALL\n");
  ASSERT_NE(unmarked.DefaultPartition(), nullptr);
  EXPECT_EQ(unmarked.DefaultPartition()->name, "a");

  EXPECT_EQ(ClusterConfig{}.DefaultPartition(), nullptr);
}

TEST(ClusterConfigTest, FindPartitionByExactName) {
  const ClusterConfig config =
      MustParse("NodeName=n1\nPartitionName=a Nodes=ALL\nPartitionName=b Nodes=ALL\n");
  ASSERT_NE(config.FindPartition("b"), nullptr);
  EXPECT_EQ(config.FindPartition("b")->name, "b");
  EXPECT_EQ(config.FindPartition("c"), nullptr);
  EXPECT_EQ(config.FindPartition("B"), nullptr);
}

TEST(ClusterConfigTest, DefaultNodeSpecIsATypicalGpuNode) {
  const NodeSpec spec = DefaultNodeSpec("gpu001");
  EXPECT_EQ(spec.name, "gpu001");
  EXPECT_EQ(spec.cpus, 64);
  EXPECT_EQ(spec.memory_mb, 512 * 1024);
  EXPECT_EQ(spec.gpus, 8);
  EXPECT_TRUE(spec.features.empty());
}

// --- GpuNuma and the topology keys of --print-node

TEST(ClusterConfigTest, GpuNumaGivesEachGpusNumaNode) {
  const ClusterConfig config = MustParse(
      "NodeName=DEFAULT Gpus=8 GpuNuma=0,0,0,0,1,1,1,1\n"
      "NodeName=a[1-2] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2\n"
      "NodeName=b1 Gpus=2 gpunuma=1,0\n"
      "NodeName=c1 Gpus=0 GpuNuma=\n"
      "PartitionName=p Nodes=ALL\n");
  ASSERT_EQ(config.nodes.size(), 4U);
  EXPECT_EQ(config.nodes[0].gpu_numa, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(config.nodes[0].sockets, 2);
  EXPECT_EQ(config.nodes[0].cores_per_socket, 56);
  EXPECT_EQ(config.nodes[0].threads_per_core, 2);
  EXPECT_EQ(config.nodes[2].gpu_numa, (std::vector<int>{1, 0}));
  EXPECT_EQ(config.nodes[3].gpus, 0);
}

TEST(ClusterConfigTest, GresGivesTheGpusAndTheirType) {
  const ClusterConfig config = MustParse(
      "NodeName=DEFAULT Gres=gpu:h100:8\n"
      "NodeName=a1 GpuNuma=0,0,0,0,1,1,1,1\n"
      "NodeName=b1 Gres=gpu:4 Gpus=4\n"
      "NodeName=c1 Gres=gpu:a100-80gb:2\n"
      "PartitionName=p Nodes=ALL\n");
  ASSERT_EQ(config.nodes.size(), 3U);
  EXPECT_EQ(config.nodes[0].gpus, 8);
  EXPECT_EQ(config.nodes[0].gpu_type, "h100");
  EXPECT_EQ(config.nodes[1].gpus, 4);
  EXPECT_EQ(config.nodes[1].gpu_type, "");
  EXPECT_EQ(config.nodes[2].gpu_type, "a100-80gb");
}

TEST(ClusterConfigErrorTest, GresIsOneKindOfGpuAndAgreesWithGpus) {
  Diagnostic error = OnlyError("NodeName=n0\nNodeName=n1 Gpus=4 Gres=gpu:h100:8\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.message, "Gres=gpu:h100:8 and Gpus=4 disagree");
  EXPECT_EQ(error.hint, "give the GPUs once, with Gres= (or Gpus=)");
  EXPECT_EQ(OnlyError("NodeName=n0\nNodeName=n1 Gres=mps:100\n").message,
            "Gres=mps:100: GPUs are the only generic resource");
  EXPECT_EQ(
      OnlyError("NodeName=n0\nNodeName=n1 Gres=gpu:h100:4,gpu:a100:4\n").message,
      "Gres=gpu:h100:4,gpu:a100:4: a node has one kind of GPU here; several are not supported");
  EXPECT_EQ(OnlyError("NodeName=n0\nNodeName=n1 Gres=gpu:h100:x\n").message,
            "Gres=gpu:h100:x: \"x\" is not a GPU count from 0 to 64");
}

TEST(ClusterConfigErrorTest, GpuNumaMustNameOneNumaNodePerGpu) {
  Diagnostic error = OnlyError("NodeName=n0\nNodeName=n1 Gpus=4 GpuNuma=0,0,1\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 28);
  EXPECT_EQ(error.message, "GpuNuma= lists 3 NUMA nodes but the node has Gpus=4");
  EXPECT_EQ(error.hint, "give one NUMA node per GPU, in GPU order");
  // Gpus= of a DEFAULT line counts; the mismatch is the node line's.
  error = OnlyError("NodeName=n0\nNodeName=DEFAULT GpuNuma=0,1\nNodeName=n1 Gpus=4\n");
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.message, "GpuNuma= lists 2 NUMA nodes but the node has Gpus=4");
}

TEST(ClusterConfigErrorTest, GpuNumaValuesAreNumaNodeNumbers) {
  Diagnostic error = OnlyError("NodeName=n0\nNodeName=n1 Gpus=4 GpuNuma=0,0,-1,1\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 32) << "the column of -1";
  EXPECT_EQ(error.message, "GpuNuma: \"-1\" is not a NUMA node number from 0 to 1023");
  EXPECT_TRUE(Contains(error.hint, "GpuNuma=0,0,0,0,1,1,1,1")) << error.hint;
  EXPECT_EQ(OnlyError("NodeName=n0\nNodeName=n1 Gpus=2 GpuNuma=0,,1\n").message,
            "GpuNuma: \"\" is not a NUMA node number from 0 to 1023");
  EXPECT_EQ(OnlyError("NodeName=n0\nNodeName=n1 Gpus=1 GpuNuma=x\n").where.column, 28);
  EXPECT_EQ(OnlyError("NodeName=n0\nNodeName=n1 Gpus=1 GpuNuma=1024\n").message,
            "GpuNuma: \"1024\" is not a NUMA node number from 0 to 1023");
  EXPECT_EQ(OnlyError("NodeName=n0\nNodeName=n1 Sockets=0\n").message,
            "Sockets must be a positive integer, found \"0\"");
}

// --- Scheduling policy: priority, preemption, QOS, accounts
// ----------------------------------------

constexpr std::string_view kPolicyConfig = R"(NodeName=gpu[1-4] Gpus=8
PartitionName=train Nodes=ALL Default=YES AllowUsers=alice,bob PreemptMode=requeue \
    GraceTime=120 PreemptSignal=SIGUSR2
PartitionName=cpu Nodes=gpu1 PreemptMode=SUSPEND GraceTime=1:30 PreemptSignal=15
PriorityWeightAge=100 PriorityWeightFairshare=200 PriorityWeightJobSize=0
PriorityWeightPartition=400 PriorityWeightQOS=500
PriorityMaxAge=2-0 PriorityDecayHalfLife=12:00:00 PriorityFavorSmall=YES
PreemptMode=Cancel PreemptGraceTime=45 PreemptExemptTime=10 PreemptSignal=usr2
BackfillDepth=20 MaxArraySize=1001 DefaultQOS=low
QOSName=high Priority=100 MaxJobsPerUser=4 MaxSubmitJobsPerUser=40 MaxGpusPerUser=64 \
    MaxGpusPerAccount=256 MaxWall=3-00:00:00 Preempt=normal,low PreemptMode=OFF GraceTime=5:00 \
    PreemptSignal=TERM
QOSName=normal Priority=10
AccountName=vision Shares=30 UserShares=alice:2,bob
AccountName=speech
)";

TEST(ClusterConfigPolicyTest, GlobalPriorityAndPreemptionKeys) {
  const ClusterConfig config = MustParse(kPolicyConfig);
  EXPECT_EQ(config.priority.age, 100);
  EXPECT_EQ(config.priority.fairshare, 200);
  EXPECT_EQ(config.priority.job_size, 0);
  EXPECT_EQ(config.priority.partition, 400);
  EXPECT_EQ(config.priority.qos, 500);
  EXPECT_EQ(config.priority.max_age, days(2));
  EXPECT_EQ(config.priority.decay_half_life, hours(12));
  EXPECT_TRUE(config.priority.favor_small);
  EXPECT_EQ(config.preempt_mode, PreemptMode::kCancel);
  EXPECT_EQ(config.preempt_grace_time, seconds(45));
  EXPECT_EQ(config.preempt_exempt_time, minutes(10));  // Slurm time: a number is minutes
  EXPECT_EQ(config.preempt_signal, 12);                // SIGUSR2
  EXPECT_EQ(config.backfill_depth, 20);
  EXPECT_EQ(config.max_array_size, 1001);
  EXPECT_EQ(config.default_qos, "low");
}

TEST(ClusterConfigPolicyTest, AccountsFormATreeWithLimits) {
  const ClusterConfig config = MustParse(R"(NodeName=n1
PartitionName=p Nodes=n1
PriorityUsageResetPeriod=monthly
AccountName=research Shares=3 GrpTRES=gres/gpu=16,cpu=512 GrpTRESMins=gres/gpu=600000
AccountName=vision Parent=research MaxJobs=4 MaxSubmitJobs=100 MaxTRESPerJob=gres/gpu=8
AccountName=cv Parent=vision Users=alice GrpJobs=2 Description="computer vision"
AccountName=ops Parent=root
)");
  EXPECT_EQ(config.usage_reset_period, UsageResetPeriod::kMonthly);
  ASSERT_EQ(config.accounts.size(), 4U);
  const AccountSpec& research = config.accounts[0];
  EXPECT_EQ(research.parent, "");
  EXPECT_EQ(research.limits.grp_tres.gpus, 16);
  EXPECT_EQ(research.limits.grp_tres.cpus, 512);
  EXPECT_EQ(research.limits.grp_tres_mins.gpus, 600000);
  EXPECT_EQ(FormatLimits(research.limits),
            "GrpTRES=cpu=512,gres/gpu=16 GrpTRESMins=gres/gpu=600000");
  EXPECT_EQ(config.accounts[1].parent, "research");
  EXPECT_EQ(config.accounts[1].limits.max_jobs, 4);
  EXPECT_EQ(config.accounts[1].limits.max_tres_per_job.gpus, 8);
  EXPECT_EQ(config.accounts[2].description, "computer vision");
  EXPECT_EQ(config.accounts[3].parent, "") << "Parent=root is the top";
  std::vector<std::string> chain;
  for (const AccountSpec* a : config.AccountChain("cv")) chain.push_back(a->name);
  EXPECT_EQ(chain, (std::vector<std::string>{"cv", "vision", "research"}));
  EXPECT_TRUE(config.AccountChain("nobody").empty());
}

TEST(ClusterConfigPolicyTest, AnAccountTreeWithALoopIsRefused) {
  const Diagnostic error = OnlyError(R"(NodeName=n1
PartitionName=p Nodes=n1
AccountName=a Parent=c
AccountName=b Parent=a
AccountName=c Parent=b
)");
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.message,
            "account a would be under itself (a under c under b under a); give one of them "
            "another parent");
}

TEST(ClusterConfigPolicyTest, QosLinesTakeGrpLimitsAndAccountsListTheirQos) {
  const ClusterConfig config = MustParse(R"(NodeName=n1
PartitionName=p Nodes=n1
QOSName=burst Priority=10 GrpTRES=gres/gpu=16 GrpTRESMins=gres/gpu=6000 GrpJobs=4 MaxTRESPerJob=node=2 Description="burst capacity"
AccountName=research QOS=normal,burst DefaultQOS=normal
AccountName=vision Parent=research DefaultQOS=burst
)");
  const QosSpec* burst = config.FindQos("burst");
  ASSERT_NE(burst, nullptr);
  EXPECT_EQ(burst->limits.grp_tres.gpus, 16);
  EXPECT_EQ(burst->limits.grp_tres_mins.gpus, 6000);
  EXPECT_EQ(burst->limits.grp_jobs, 4);
  EXPECT_EQ(burst->limits.max_tres_per_job.nodes, 2);
  EXPECT_EQ(burst->description, "burst capacity");
  EXPECT_FALSE(burst->managed);
  const AssocQos vision = QosOf(config, "vision", "alice");
  EXPECT_EQ(vision.allowed, (std::vector<std::string>{"normal", "burst"})) << "the parent's list";
  EXPECT_EQ(vision.default_qos, "burst");
  EXPECT_TRUE(QosOf(config, "ops", "alice").allowed.empty()) << "no line: every QOS";

  const Diagnostic unknown = OnlyError(R"(NodeName=n1
PartitionName=p Nodes=n1
AccountName=research QOS=normal,gold
)");
  EXPECT_EQ(unknown.where.line, 3);
  EXPECT_EQ(unknown.message,
            "account research: no QOS gold; QOS are normal (sacctmgr add qos gold makes one)");
  const Diagnostic outside = OnlyError(R"(NodeName=n1
PartitionName=p Nodes=n1
QOSName=burst
AccountName=research QOS=burst
AccountName=vision Parent=research DefaultQOS=normal
)");
  EXPECT_EQ(outside.message,
            "account vision: DefaultQOS=normal is not one of the QOS it may use (burst); add it "
            "to QOS= or pick one of those");

  AssocLimits limits;
  ASSERT_TRUE(SetLimit("QOS", "a,b", limits).ok());
  ASSERT_TRUE(SetLimit("QOS+", "c,a", limits).ok());
  ASSERT_TRUE(SetLimit("QOS-", "b", limits).ok());
  EXPECT_EQ(limits.qos, (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(SetLimit("DefaultQOS", "a,c", limits).ok()) << "one default";
  EXPECT_FALSE(SetLimit("QOS", "a b", limits).ok());
  EXPECT_FALSE(limits.Empty());
  EXPECT_FALSE(limits.HasQuota()) << "a QOS list is no quota";
  ASSERT_TRUE(SetLimit("QOS", "-1", limits).ok());
  EXPECT_TRUE(limits.qos.empty());

  QosSpec qos;
  EXPECT_TRUE(SetQosKey("maxwall", "1:00:00", qos).ok());
  EXPECT_EQ(qos.max_wall, std::chrono::hours(1));
  const absl::Status typo = SetQosKey("MaxJobsPerUsr", "3", qos);
  EXPECT_NE(typo.message().find("did you mean MaxJobsPerUser?"), std::string_view::npos) << typo;
}

TEST(AccountLimitsTest, LimitsSetClearAndOverlay) {
  AssocLimits limits;
  ASSERT_TRUE(SetLimit("grptres", "gres/gpu=8,cpu=64", limits).ok());
  ASSERT_TRUE(SetLimit("GrpTRES", "cpu=-1,node=2", limits).ok()) << "one TRES at a time";
  EXPECT_EQ(FormatTres(limits.grp_tres), "node=2,gres/gpu=8");
  ASSERT_TRUE(SetLimit("MaxJobs", "3", limits).ok());
  ASSERT_TRUE(SetLimit("MaxJobs", "-1", limits).ok());
  EXPECT_FALSE(limits.max_jobs);
  const AssocLimits before = limits;
  EXPECT_FALSE(SetLimit("GrpTRES", "gres/gpu=2,mem=5", limits).ok());
  EXPECT_EQ(limits, before) << "a refusal changes nothing";
  EXPECT_FALSE(SetLimit("GrpWall", "5", limits).ok());
  AssocLimits outer;
  outer.max_jobs = 5;
  outer.grp_tres.gpus = 99;
  const AssocLimits merged = Overlay(limits, outer);
  EXPECT_EQ(merged.max_jobs, 5);
  EXPECT_EQ(merged.grp_tres.gpus, 8) << "the inner limit wins";
}

TEST(AccountLimitsTest, UsagePeriodsStartOnTheirBoundaries) {
  using std::chrono::milliseconds;
  // 2026-12-06 15:00 UTC, a Sunday.
  const milliseconds now = std::chrono::duration_cast<milliseconds>(
      (std::chrono::sys_days(std::chrono::year(2026) / 12 / 6) + hours(15)).time_since_epoch());
  const auto date = [](milliseconds at) {
    const std::chrono::year_month_day d(
        std::chrono::floor<std::chrono::days>(std::chrono::sys_time<milliseconds>(at)));
    return fmt::format("{}-{:02}-{:02}", static_cast<int>(d.year()),
                       static_cast<unsigned>(d.month()), static_cast<unsigned>(d.day()));
  };
  EXPECT_EQ(date(PeriodStart(UsageResetPeriod::kMonthly, now)), "2026-12-01");
  EXPECT_EQ(date(NextPeriodStart(UsageResetPeriod::kMonthly, now)), "2027-01-01");
  EXPECT_EQ(date(PeriodStart(UsageResetPeriod::kWeekly, now)), "2026-11-30") << "a Monday";
  EXPECT_EQ(date(PeriodStart(UsageResetPeriod::kQuarterly, now)), "2026-10-01");
  EXPECT_EQ(date(NextPeriodStart(UsageResetPeriod::kYearly, now)), "2027-01-01");
  EXPECT_EQ(PeriodStart(UsageResetPeriod::kNone, now).count(), 0);
}

TEST(ClusterConfigPolicyTest, PolicyDefaultsWithoutAnyKey) {
  const ClusterConfig config = MustParse("NodeName=n1\nPartitionName=p Nodes=n1\n");
  EXPECT_EQ(config.priority.age, 1000);
  EXPECT_EQ(config.priority.fairshare, 10000);
  EXPECT_EQ(config.priority.max_age, days(7));
  EXPECT_EQ(config.priority.decay_half_life, days(7));
  EXPECT_FALSE(config.priority.favor_small);
  EXPECT_EQ(config.preempt_mode, PreemptMode::kOff);
  EXPECT_EQ(config.preempt_grace_time, seconds(60));
  EXPECT_EQ(config.preempt_exempt_time, seconds(0));
  EXPECT_EQ(config.preempt_signal, 10);
  EXPECT_EQ(config.backfill_depth, 100);
  EXPECT_EQ(config.max_array_size, 10001);
  EXPECT_TRUE(config.accounts.empty());
  // The DefaultQOS exists though no line declares it.
  ASSERT_EQ(config.qos.size(), 1U);
  EXPECT_EQ(config.qos[0].name, "normal");
  EXPECT_EQ(config.qos[0].priority, 0);
  EXPECT_FALSE(config.qos[0].max_jobs_per_user.has_value());
  EXPECT_EQ(config.FindQos("normal"), &config.qos[0]);
  const PartitionSpec& p = config.partitions[0];
  EXPECT_TRUE(p.allow_users.empty());
  EXPECT_FALSE(p.preempt_mode.has_value());
  EXPECT_FALSE(p.grace_time.has_value());
  EXPECT_FALSE(p.preempt_signal.has_value());
}

TEST(ClusterConfigPolicyTest, PartitionPreemptionKeys) {
  const ClusterConfig config = MustParse(kPolicyConfig);
  ASSERT_EQ(config.partitions.size(), 2U);
  const PartitionSpec& train = config.partitions[0];
  EXPECT_EQ(train.allow_users, (Names{"alice", "bob"}));
  EXPECT_EQ(train.preempt_mode, PreemptMode::kRequeue);
  EXPECT_EQ(train.grace_time, seconds(120));  // a plain number is seconds
  EXPECT_EQ(train.preempt_signal, 12);
  const PartitionSpec& cpu = config.partitions[1];
  EXPECT_EQ(cpu.preempt_mode, PreemptMode::kSuspend);
  EXPECT_EQ(cpu.grace_time, seconds(90));  // M:S
  EXPECT_EQ(cpu.preempt_signal, 15);
}

TEST(ClusterConfigPolicyTest, QosLines) {
  const ClusterConfig config = MustParse(kPolicyConfig);
  // high, normal, and the undeclared DefaultQOS low appended last.
  ASSERT_EQ(config.qos.size(), 3U);
  const QosSpec* high = config.FindQos("high");
  ASSERT_NE(high, nullptr);
  EXPECT_EQ(high->priority, 100);
  EXPECT_EQ(high->max_jobs_per_user, 4);
  EXPECT_EQ(high->max_submit_jobs_per_user, 40);
  EXPECT_EQ(high->max_gpus_per_user, 64);
  EXPECT_EQ(high->max_gpus_per_account, 256);
  EXPECT_EQ(high->max_wall, days(3));
  EXPECT_EQ(high->preempt, (Names{"normal", "low"}));
  EXPECT_EQ(high->preempt_mode, PreemptMode::kOff);
  EXPECT_EQ(high->grace_time, minutes(5));
  EXPECT_EQ(high->preempt_signal, 15);
  EXPECT_EQ(high->defined_at.line, 10);
  const QosSpec* normal = config.FindQos("normal");
  ASSERT_NE(normal, nullptr);
  EXPECT_EQ(normal->priority, 10);
  EXPECT_FALSE(normal->max_wall.has_value());
  EXPECT_TRUE(normal->preempt.empty());
  const QosSpec* low = config.FindQos("low");
  ASSERT_NE(low, nullptr);
  EXPECT_EQ(low, &config.qos[2]);
  EXPECT_EQ(low->name, "low");
  EXPECT_EQ(low->priority, 0);
  EXPECT_EQ(config.FindQos("High"), nullptr);  // names are case-sensitive
  EXPECT_EQ(config.FindQos("none"), nullptr);
}

TEST(ClusterConfigPolicyTest, QosDefaultLineAndUnlimited) {
  const ClusterConfig config = MustParse(
      "NodeName=n1\nPartitionName=p Nodes=n1\n"
      "QOSName=DEFAULT MaxJobsPerUser=8 MaxWall=1-0 Priority=5\n"
      "QOSName=normal\n"
      "qosname=long MaxJobsPerUser=UNLIMITED MaxWall=UNLIMITED\n");
  ASSERT_EQ(config.qos.size(), 2U);
  EXPECT_EQ(config.qos[0].name, "normal");
  EXPECT_EQ(config.qos[0].max_jobs_per_user, 8);
  EXPECT_EQ(config.qos[0].max_wall, days(1));
  EXPECT_EQ(config.qos[0].priority, 5);
  EXPECT_EQ(config.qos[1].name, "long");
  EXPECT_FALSE(config.qos[1].max_jobs_per_user.has_value());
  EXPECT_FALSE(config.qos[1].max_wall.has_value());
}

TEST(ClusterConfigPolicyTest, AccountLines) {
  const ClusterConfig config = MustParse(kPolicyConfig);
  ASSERT_EQ(config.accounts.size(), 2U);
  const AccountSpec* vision = config.FindAccount("vision");
  ASSERT_NE(vision, nullptr);
  EXPECT_EQ(vision->shares, 30);
  EXPECT_EQ(vision->user_shares,
            (std::vector<std::pair<std::string, int>>{{"alice", 2}, {"bob", 1}}));
  EXPECT_EQ(vision->defined_at.line, 14);
  const AccountSpec* speech = config.FindAccount("speech");
  ASSERT_NE(speech, nullptr);
  EXPECT_EQ(speech->shares, 1);
  EXPECT_TRUE(speech->user_shares.empty());
  EXPECT_EQ(config.FindAccount("nlp"), nullptr);
}

TEST(ClusterConfigPolicyTest, TheExampleFileParsesCleanWithItsPolicy) {
  const std::string text = testing::ReadData("../../etc/cohort/cohort.conf");
  const ConfigResult result = ParseClusterConfig(text, "etc/cohort/cohort.conf", MapLoader({}));
  EXPECT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  const ClusterConfig& config = result.config;
  EXPECT_EQ(config.preempt_mode, PreemptMode::kRequeue);
  EXPECT_EQ(config.preempt_grace_time, seconds(120));
  EXPECT_EQ(config.preempt_exempt_time, minutes(10));
  ASSERT_NE(config.FindQos("high"), nullptr);
  EXPECT_EQ(config.FindQos("high")->preempt, (Names{"normal", "low"}));
  ASSERT_NE(config.FindQos("low"), nullptr);
  EXPECT_EQ(config.FindQos("low")->preempt_signal, 15);
  EXPECT_EQ(config.qos.size(), 3U);  // normal is declared: no implicit entry
  ASSERT_EQ(config.accounts.size(), 3U);
  EXPECT_EQ(config.FindAccount("vision")->shares, 40);
}

TEST(ClusterConfigPolicyTest, PreemptModesAndSignalsByEveryName) {
  for (const auto& [text, mode] :
       std::vector<std::pair<std::string, PreemptMode>>{{"off", PreemptMode::kOff},
                                                        {"REQUEUE", PreemptMode::kRequeue},
                                                        {"Cancel", PreemptMode::kCancel},
                                                        {"suspend", PreemptMode::kSuspend}}) {
    const ClusterConfig config =
        MustParse("NodeName=n1\nPartitionName=p Nodes=n1\nPreemptMode=" + text + "\n");
    EXPECT_EQ(config.preempt_mode, mode) << text;
    EXPECT_TRUE(EqualsIgnoreCase(PreemptModeName(mode), text)) << text;
  }
  EXPECT_EQ(PreemptModeName(PreemptMode::kRequeue), "REQUEUE");
  for (const auto& [text, number] : std::vector<std::pair<std::string, int>>{
           {"USR1", 10}, {"sigusr1", 10}, {"TERM", 15}, {"SIGINT", 2}, {"1", 1}, {"64", 64}}) {
    const ClusterConfig config =
        MustParse("NodeName=n1\nPartitionName=p Nodes=n1\nPreemptSignal=" + text + "\n");
    EXPECT_EQ(config.preempt_signal, number) << text;
  }
}

TEST(ClusterConfigPolicyTest, HalfLifeMayBeUnlimited) {
  const ClusterConfig config =
      MustParse("NodeName=n1\nPartitionName=p Nodes=n1\nPriorityDecayHalfLife=UNLIMITED\n");
  EXPECT_EQ(config.priority.decay_half_life, kUnlimited);
}

TEST(ClusterConfigPolicyTest, FindQosOfAConfigBuiltInCode) {
  ClusterConfig config;
  config.default_qos = "standard";
  const QosSpec* implicit = config.FindQos("standard");
  ASSERT_NE(implicit, nullptr);
  EXPECT_EQ(implicit->priority, 0);
  EXPECT_FALSE(implicit->max_gpus_per_user.has_value());
  EXPECT_EQ(config.FindQos("other"), nullptr);
}

// Every policy error: the line, the column of the value, the message, the hint.
struct PolicyError {
  std::string line;  // appended after two node/partition lines, so it is line 3
  int column;
  std::string message;
  std::string hint_part;
};

TEST(ClusterConfigPolicyErrorTest, EachBadValueIsReportedAtItsPlace) {
  const std::vector<PolicyError> cases = {
      {"PriorityWeightAge=-1", 19, "PriorityWeightAge must be a non-negative integer, found \"-1\"",
       "PriorityWeightAge=<number>"},
      {"PriorityWeightQOS=2000000000", 19, "PriorityWeightQOS=2000000000 is more than 1000000000",
       "from 0 to 1000000000"},
      {"PriorityWeightFairshare=x", 25,
       "PriorityWeightFairshare must be a non-negative integer, found \"x\"", ""},
      {"PriorityMaxAge=0", 16, "PriorityMaxAge must be longer than 0", "PriorityMaxAge=7-0"},
      {"PriorityMaxAge=UNLIMITED", 16, "PriorityMaxAge cannot be UNLIMITED", "give a time"},
      {"PriorityDecayHalfLife=0", 23, "PriorityDecayHalfLife must be longer than 0",
       "UNLIMITED for no decay"},
      {"PriorityDecayHalfLife=soon", 23, "PriorityDecayHalfLife: time \"soon\"", "for example"},
      {"PriorityFavorSmall=perhaps", 20, "PriorityFavorSmall must be YES or NO, found \"perhaps\"",
       ""},
      {"PreemptMode=GANG", 13, "PreemptMode=GANG: Slurm's GANG mode is not supported",
       "use OFF, REQUEUE, CANCEL or SUSPEND"},
      {"PreemptMode=SUSPEND,GANG", 13,
       "PreemptMode=SUSPEND,GANG: Slurm's GANG mode is not supported", "QOS Preempt="},
      {"PreemptMode=kill", 13, "PreemptMode=kill is not OFF, REQUEUE, CANCEL or SUSPEND",
       "one mode per line"},
      {"PreemptGraceTime=-5", 18, "PreemptGraceTime=\"-5\" is neither seconds nor a finite time",
       "PreemptGraceTime=120"},
      {"PreemptGraceTime=UNLIMITED", 18,
       "PreemptGraceTime=\"UNLIMITED\" is neither seconds nor a finite time", ""},
      {"PreemptExemptTime=INFINITE", 19, "PreemptExemptTime cannot be INFINITE", ""},
      {"PreemptSignal=USR3", 15, "PreemptSignal=USR3 is not a signal",
       "use one of HUP, INT, QUIT, ILL, TRAP, ABRT, BUS, FPE, USR1, SEGV, USR2, PIPE, ALRM, TERM, "
       "CONT, TSTP, URG, XCPU, VTALRM, WINCH (with or without SIG), or a number from 1 to 64"},
      {"PreemptSignal=65", 15, "PreemptSignal=65 is not a signal number from 1 to 64", ""},
      {"PreemptSignal=0", 15, "PreemptSignal=0 is not a signal number from 1 to 64", ""},
      {"PreemptSignal=SIGKILL", 15,
       "PreemptSignal=SIGKILL: SIGKILL cannot be caught, so the job could not checkpoint",
       "PreemptSignal=USR1"},
      {"PreemptSignal=19", 15,
       "PreemptSignal=19: SIGSTOP cannot be caught, so the job could not checkpoint", ""},
      {"BackfillDepth=0", 15, "BackfillDepth must be a positive integer, found \"0\"", ""},
      {"ContainerPullAhead=UNLIMITED", 20, "ContainerPullAhead cannot be UNLIMITED",
       "ContainerPullAhead=2-00:00:00"},
      {"ContainerRuntime=crun", 18, "ContainerRuntime=crun is not builtin or none",
       "ContainerRuntime=none to run no containers"},
      {"MaxArraySize=4000002", 14, "MaxArraySize=4000002 is more than 4000001",
       "from 1 to 4000001"},
      {"DefaultQOS=", 12, "DefaultQOS is empty", "DefaultQOS=normal"},
      {"QOSName=q Priority=-3", 20, "Priority must be a non-negative integer, found \"-3\"", ""},
      {"QOSName=q MaxGpusPerUser=lots", 26,
       "MaxGpusPerUser must be a non-negative integer, found \"lots\"", ""},
      {"QOSName=q MaxWall=0", 19, "MaxWall must be longer than 0", "UNLIMITED"},
      {"QOSName=q PreemptMode=WITHIN", 23,
       "PreemptMode=WITHIN: Slurm's WITHIN mode is not supported", ""},
      {"QOSName=q GraceTime=soon", 21, "GraceTime=\"soon\" is neither seconds nor a finite time",
       ""},
      {"QOSName=q MaxJobsPerUsr=3", 11, "unknown key \"MaxJobsPerUsr\" in a QOSName line",
       "did you mean MaxJobsPerUser?"},
      {"QOSName= Priority=1", 9, "QOS without a name", "QOSName=<name>"},
      {"AccountName=a Shares=0", 22, "Shares must be a positive integer, found \"0\"", ""},
      {"AccountName=a UserShares=alice:0", 26,
       "UserShares: \"alice:0\": shares must be a positive integer up to 1000000000",
       "alice:1 or more"},
      {"AccountName=a UserShares=bob,:2", 30, "UserShares: \":2\" names no user", ""},
      {"AccountName=a UserShares=bob,alice:3,bob:2", 38, "UserShares: user bob is listed twice",
       ""},
      {"AccountName=a Share=2", 15, "unknown key \"Share\" in an AccountName line", "Shares"},
      {"AccountName=DEFAULT Shares=2", 13, "AccountName=DEFAULT is not supported", "Shares=1"},
      {"AccountName=", 13, "account without a name", ""},
      {"AccountName=a GrpTRES=gres/gpu=lots", 23,
       "GrpTRES: \"gres/gpu=lots\" needs a count from 0 to 1000000000000 (or -1 to clear), as "
       "GrpTRES=gres/gpu=8,cpu=256,node=4",
       ""},
      {"AccountName=a GrpTRESMins=node=5", 27,
       "GrpTRESMins: \"node=5\" is no TRES Cohort limits; name cpu or gres/gpu (as "
       "GrpTRESMins=gres/gpu=600000 (GPU-minutes),cpu=1000000)",
       ""},
      {"AccountName=a MaxJobs=x", 23,
       "MaxJobs=\"x\": give a count from 0 to 1000000000, or -1 to clear it", ""},
      {"AccountName=a Parent=b", 1,
       "account a: its parent b is no account; add that account first, or write Parent=root",
       "Parent="},
      {"PriorityUsageResetPeriod=FORTNIGHTLY", 26,
       "PriorityUsageResetPeriod=FORTNIGHTLY: not a usage period", "MONTHLY"},
      {"PartitionName=q Nodes=n1 PreemptMode=gang", 38,
       "PreemptMode=gang: Slurm's gang mode is not supported", ""},
      {"PartitionName=q Nodes=n1 GraceTime=x", 36,
       "GraceTime=\"x\" is neither seconds nor a finite time", ""},
      {"PartitionName=q Nodes=n1 PreemptSignal=STOP", 40,
       "PreemptSignal=STOP: SIGSTOP cannot be caught, so the job could not checkpoint", ""},
      {"ClusterName=c QOSName=q", 15, "QOSName= must start its line", "line of its own"},
  };
  for (const PolicyError& c : cases) {
    const Diagnostic error = OnlyError("NodeName=n1\nPartitionName=p Nodes=n1\n" + c.line + "\n");
    EXPECT_EQ(error.where.file, kFile) << c.line;
    EXPECT_EQ(error.where.line, 3) << c.line;
    EXPECT_EQ(error.where.column, c.column) << c.line;
    EXPECT_TRUE(Contains(error.message, c.message)) << c.line << ": " << error.message;
    EXPECT_TRUE(Contains(error.hint, c.hint_part)) << c.line << ": " << error.hint;
  }
}

TEST(ClusterConfigPolicyErrorTest, BadLinesAreLeftOut) {
  const ConfigResult result = Parse(
      "NodeName=n1\nPartitionName=p Nodes=n1\n"
      "QOSName=q Priority=x\n"
      "AccountName=a Shares=0\n");
  EXPECT_EQ(result.diagnostics.ErrorCount(), 2) << result.diagnostics.Format();
  EXPECT_EQ(result.config.FindQos("q"), nullptr);
  EXPECT_EQ(result.config.FindAccount("a"), nullptr);
}

TEST(ClusterConfigPolicyErrorTest, DuplicateQosAndAccounts) {
  Diagnostic error =
      OnlyError("NodeName=n1\nQOSName=high Priority=1\nQOSName=low\nQOSName=high Priority=2\n");
  EXPECT_EQ(error.where.line, 4);
  EXPECT_EQ(error.where.column, 9);
  EXPECT_EQ(error.message, "QOS high is defined twice (first at line 2)");
  EXPECT_EQ(error.hint, "merge the two QOSName lines");
  error = OnlyError("NodeName=n1\nAccountName=ml Shares=2\nAccountName=ml\n");
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.where.column, 13);
  EXPECT_EQ(error.message, "account ml is defined twice (first at line 2)");
}

TEST(ClusterConfigPolicyErrorTest, PreemptMustNameKnownQosOtherThanItself) {
  Diagnostic error = OnlyError("NodeName=n1\nQOSName=high Preempt=low,scavenger\nQOSName=low\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 22);
  EXPECT_EQ(error.message, "QOS high may preempt unknown QOS scavenger");
  // The known list includes the implicit DefaultQOS.
  EXPECT_EQ(error.hint, "known QOS: high, low, normal; declare it with QOSName=scavenger");

  error = OnlyError("NodeName=n1\nQOSName=high Preempt=normal,high\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 22);
  EXPECT_EQ(error.message, "QOS high lists itself in Preempt=");
  EXPECT_TRUE(Contains(error.hint, "remove high from Preempt=")) << error.hint;

  // Preempt= from a DEFAULT line is checked on each QOS, at the DEFAULT line.
  error = OnlyError("NodeName=n1\nQOSName=DEFAULT Preempt=gone\nQOSName=a\n");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.message, "QOS a may preempt unknown QOS gone");

  // A later DefaultQOS= counts, wherever it is set.
  const ClusterConfig config = MustParse(
      "NodeName=n1\nPartitionName=p Nodes=n1\nQOSName=high Preempt=std\nDefaultQOS=std\n");
  EXPECT_NE(config.FindQos("std"), nullptr);
}

// --- Who may do what: authentication, operators, accounts' members --------

TEST(ClusterConfigSecurityTest, AuthOperatorsPrivateDataAndMembers) {
  const ClusterConfig config = MustParse(
      "AuthType=auth/munge AuthInfo=socket=/run/cluster/munge.sock CohortUser=cohort\n"
      "Operators=ops1,ops2 PrivateData=jobs,usage\n"
      "NodeName=n1\nPartitionName=p Nodes=n1 AllowQos=normal,urgent\n"
      "QOSName=urgent AllowAccounts=physics AllowUsers=carol\n"
      "AccountName=physics Users=alice,bob\n");
  EXPECT_EQ(config.auth_type, AuthType::kMunge);
  EXPECT_EQ(config.munge_socket, "/run/cluster/munge.sock");
  EXPECT_EQ(config.cohort_user, "cohort");
  EXPECT_EQ(config.operators, (Names{"ops1", "ops2"}));
  EXPECT_TRUE(config.private_data.jobs);
  EXPECT_TRUE(config.private_data.usage);
  EXPECT_EQ(config.partitions[0].allow_qos, (Names{"normal", "urgent"}));
  const QosSpec* urgent = config.FindQos("urgent");
  ASSERT_NE(urgent, nullptr);
  EXPECT_EQ(urgent->allow_accounts, (Names{"physics"}));
  EXPECT_EQ(urgent->allow_users, (Names{"carol"}));
  EXPECT_EQ(config.FindAccount("physics")->users, (Names{"alice", "bob"}));

  const ClusterConfig defaults = MustParse("NodeName=n1\nPartitionName=p Nodes=n1\n");
  EXPECT_EQ(defaults.auth_type, AuthType::kAuto);
  EXPECT_EQ(defaults.munge_socket, "");
  EXPECT_EQ(defaults.cohort_user, "root");
  EXPECT_FALSE(defaults.private_data.jobs);
  EXPECT_EQ(MustParse("AuthType=none\nNodeName=n1\nPartitionName=p Nodes=n1\n").auth_type,
            AuthType::kNone);
}

TEST(ClusterConfigErrorTest, AuthKeysSayWhatTheyTake) {
  Diagnostic error = OnlyError("AuthType=kerberos\nNodeName=n1\n");
  EXPECT_EQ(error.message, "AuthType=kerberos is not munge or none");
  EXPECT_NE(error.hint.find("AuthType=munge"), std::string::npos);
  error = OnlyError("AuthInfo=ttl=60\nNodeName=n1\n");
  EXPECT_EQ(error.message, "AuthInfo item \"ttl=60\" is not socket=PATH");
  EXPECT_EQ(OnlyError("PrivateData=jobs,nodes\nNodeName=n1\n").message,
            "PrivateData item \"nodes\" is not jobs or usage");
}

TEST(ClusterConfigTest, ClientSettingsCarryAuthTypeAndMungeSocket) {
  const ClientSettings settings = ReadClientSettings(
      "AuthType=munge\nAuthInfo=socket=/tmp/m.sock\nStateDir=/s\n", kFile, MapLoader({}));
  EXPECT_EQ(settings.auth_type, AuthType::kMunge);
  EXPECT_EQ(settings.munge_socket, "/tmp/m.sock");
  EXPECT_EQ(settings.state_dir, "/s");
}

TEST(ClusterConfigTest, SeveralControllersAndThePostgresqlBackend) {
  const ConfigResult result = Parse(
      "ControllerAddr=ctl1,ctl2:6821\nControllerPort=6830\nStateBackend=PostgreSQL\n"
      "StateDatabase=\"host=db1 dbname=cohort\"\nControllerTimeout=5\nNodeName=n1\n");
  ASSERT_FALSE(result.diagnostics.HasErrors()) << result.diagnostics.Format();
  EXPECT_EQ(result.config.controller_addr, "ctl1");
  EXPECT_EQ(result.config.controller_addrs, (Names{"ctl1", "ctl2:6821"}));
  EXPECT_EQ(result.config.state_backend, "postgresql");
  EXPECT_EQ(result.config.state_database, "host=db1 dbname=cohort");
  EXPECT_EQ(result.config.controller_timeout, seconds(5));
  const ClientSettings client = ReadClientSettings(
      "ControllerAddr=ctl1,ctl2:6821\nControllerPort=6830\n", kFile, MapLoader({}));
  EXPECT_EQ(client.controllers, (Names{"ctl1:6830", "ctl2:6821"}));
}

TEST(ClusterConfigTest, ANodeTimeoutShorterThanATakeoverIsWarnedAbout) {
  const std::string ha = "StateBackend=postgresql\nStateDatabase=\"host=db1\"\nNodeName=n1\n";
  const ConfigResult short_timeout = Parse(ha + "ControllerTimeout=10\nNodeTimeout=20\n");
  ASSERT_FALSE(short_timeout.diagnostics.HasErrors()) << short_timeout.diagnostics.Format();
  EXPECT_NE(
      short_timeout.diagnostics.Format().find(
          "NodeTimeout=20 is shorter than a takeover can take: ControllerTimeout=10 and 15 s"),
      std::string::npos)
      << short_timeout.diagnostics.Format();
  EXPECT_NE(short_timeout.diagnostics.Format().find("set NodeTimeout=25 or more"),
            std::string::npos);
  EXPECT_EQ(
      Parse(ha + "ControllerTimeout=10\nNodeTimeout=25\n").diagnostics.Format().find("takeover"),
      std::string::npos);
  // One controller: no takeover, no warning.
  EXPECT_EQ(Parse("NodeName=n1\nNodeTimeout=6\n").diagnostics.Format().find("takeover"),
            std::string::npos);
}

TEST(ClusterConfigTest, BadControllerAndBackendSettingsSayTheFix) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"ControllerAddr=ctl1,ctl2:0x\n", "ControllerAddr entry \"ctl2:0x\""},
           {"StateBackend=mysql\n", "StateBackend=mysql is not sqlite or postgresql"},
           {"StateBackend=postgresql\n", "StateBackend=postgresql needs StateDatabase="},
           {"ControllerTimeout=0\n", "ControllerTimeout"},
       }) {
    const ConfigResult result = Parse(text + "NodeName=n1\n");
    EXPECT_TRUE(result.diagnostics.HasErrors()) << text;
    EXPECT_NE(result.diagnostics.Format().find(expected), std::string::npos)
        << result.diagnostics.Format();
  }
}

}  // namespace
}  // namespace cohort::config
