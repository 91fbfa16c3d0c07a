// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>
#include <vector>

#include "cohort/diagnostics.h"
#include "config/conf_lexer.h"

/// Slurm 25.05's topology.yaml, read into the lines topology.conf would hold,
/// so that both files build the same model with the same checks.
namespace cohort::conf {

/// Reads `text` as topology.yaml (a list of topologies, each `topology:` with
/// one of `tree:`, `block:` or `flat:`) and returns the equivalent
/// topology.conf lines: `SwitchName=… Nodes=…|Switches=…` for each switch of
/// a tree, `BlockSizes=…` and `BlockName=… Nodes=…` for a block topology, each
/// word located at its place in the YAML file. Cohort has one topology per
/// cluster, a switch tree and blocks together, so at most one tree and one
/// block topology are taken: where there are more of a kind, the one marked
/// `cluster_default: true`. Anything else (unknown keys, wrong types, YAML
/// aliases, more than one document) is reported to `diagnostics` by line and
/// column.
[[nodiscard]] std::vector<Line> TopologyYamlLines(std::string_view text, std::string_view file,
                                                  Diagnostics& diagnostics);

/// Whether `path` names a YAML file (`.yaml` or `.yml`).
[[nodiscard]] bool IsYamlPath(std::string_view path);

}  // namespace cohort::conf
