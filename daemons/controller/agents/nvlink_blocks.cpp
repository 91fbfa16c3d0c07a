// SPDX-License-Identifier: Apache-2.0
#include "agents/nvlink_blocks.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "cluster_files.h"
#include "cohort/fmt_absl.h"
#include "controller_log.h"

namespace cohort::controller {

void NvlinkBlocks::Reported() {
  if (state_.config.topology_blocks != "auto" || gathering_) return;
  gathering_ = true;
  gather_timer_.expires_after(gather_);
  gather_timer_.async_wait([this](const boost::system::error_code& cancelled) {
    gathering_ = false;
    if (!cancelled) Write();
  });
}

void NvlinkBlocks::Write() {
  const NvlinkDomains::BlockFile blocks = state_.nvlink_domains.Blocks(*state_.topology);
  const std::string& lines = blocks.text;
  const std::string path = shell::NvlinkBlocksPath(state_.config);
  if (const absl::StatusOr<std::string> current = shell::ReadFile(path);
      current.ok() && *current == lines) {
    return;
  }
  // Written whole, then renamed over the old one: a reader sees one or the other.
  const std::string next = path + ".new";
  {
    std::ofstream out(next, std::ios::trunc);
    out << lines;
    out.flush();
    if (!out) {
      Log("controller")
          ->error("nvlink_blocks_not_written file={} reason=\"cannot write {}\"", path, next);
      return;
    }
  }
  std::error_code error;
  std::filesystem::rename(next, path, error);
  if (error) {
    Log("controller")
        ->error("nvlink_blocks_not_written file={} reason={:?}", path, error.message());
    return;
  }
  Log("controller")
      ->info("nvlink_blocks_changed blocks={} nodes={} file={} applied_in_ms={}", blocks.blocks,
             blocks.nodes, path, quiet_.count());
  apply_timer_.expires_after(quiet_);
  apply_timer_.async_wait([this](const boost::system::error_code& cancelled) {
    if (!cancelled) Apply();
  });
}

void NvlinkBlocks::Apply() {
  if (!reconfigure_) {
    Log("controller")
        ->warn(
            "nvlink_blocks_not_applied reason=\"this controller cannot restart in place; "
            "restart it to place with the reported blocks\"");
    return;
  }
  if (const absl::StatusOr<std::string> done = reconfigure_(); !done.ok()) {
    Log("controller")->warn("nvlink_blocks_not_applied reason={:?}", done.status().message());
  }
}

}  // namespace cohort::controller
