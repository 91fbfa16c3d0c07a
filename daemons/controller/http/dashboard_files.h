// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string_view>

namespace cohort::controller {

/// A file of the dashboard, built into the controller (dashboard/, by
/// cmake/EmbedFiles.cmake): nothing to install or find at run time.
struct StaticFile {
  std::string_view content_type;
  std::string_view body;
};

/// The dashboard's file served at `path` ("/" is index.html); nullopt when
/// there is none.
[[nodiscard]] std::optional<StaticFile> DashboardFile(std::string_view path);

}  // namespace cohort::controller
