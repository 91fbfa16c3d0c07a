// SPDX-License-Identifier: Apache-2.0
// A fuzz target over every parser of untrusted text: hostlists, times,
// memory sizes, cohort.conf and topology.conf. The first byte picks the
// parser. A parser may reject its input; it must never crash, hang or break
// its own contract (a hostlist that expands must survive a round trip).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "cohort/config/cluster_config.h"
#include "cohort/text/hostlist.h"
#include "cohort/text/slurm_memory.h"
#include "cohort/text/slurm_time.h"
#include "cohort/alloc/topology.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "contract broken: %s\n", what);
    std::abort();
  }
}

void FuzzHostlist(std::string_view text) {
  const absl::StatusOr<std::vector<std::string>> names = cohort::hostlist::Expand(text, 100'000);
  if (!names.ok()) {
    Require(!names.status().message().empty(), "hostlist error without a message");
    return;
  }
  const std::string compressed = cohort::hostlist::Compress(*names);
  const absl::StatusOr<std::vector<std::string>> again = cohort::hostlist::Expand(compressed);
  Require(again.ok(), "a compressed hostlist does not expand");
  const std::set<std::string> before(names->begin(), names->end());
  const std::set<std::string> after(again->begin(), again->end());
  Require(before == after, "compress changed the set of names");
  Require(again->size() == after.size(), "compress kept a duplicate");
}

void FuzzConfigs(std::string_view text) {
  const cohort::config::FileLoader loader = [](const std::string&) -> absl::StatusOr<std::string> {
    return std::string("NodeName=x[1-2] CPUs=2\n");
  };
  const cohort::config::ConfigResult config =
      cohort::config::ParseClusterConfig(text, "fuzz.conf", loader);
  std::vector<std::string> names;
  for (const cohort::config::NodeSpec& node : config.config.nodes) names.push_back(node.name);
  (void)cohort::topology::BuildTopology(text, "topology.conf", names,
                                        cohort::topology::NodeSource::kConfig);
  const cohort::topology::TopologyResult own = cohort::topology::BuildTopology(
      text, "topology.conf", {}, cohort::topology::NodeSource::kTopology);
  if (!own.diagnostics.HasErrors()) {
    const cohort::topology::Topology& t = own.topology;
    for (cohort::topology::NodeId n = 0; n < t.NodeCount(); ++n) {
      Require(t.LeafOf(n) != cohort::topology::kNone, "a node of a valid topology has no leaf");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: FuzzHostlist(text); break;
    case 1: (void)cohort::ParseSlurmTime(text); break;
    case 2: (void)cohort::ParseSlurmMemoryMb(text); break;
    default: FuzzConfigs(text); break;
  }
  return 0;
}
