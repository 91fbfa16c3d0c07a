// SPDX-License-Identifier: Apache-2.0
#include "nvml_library.h"

#include <cstdlib>

#include <fmt/format.h>

namespace cohort::agent::nvml {

std::string LibraryPath() {
  const char* chosen = std::getenv("COHORT_NVML_LIBRARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : "libnvidia-ml.so.1";
}

absl::StatusOr<Library> Load(const std::string& path) {
  Library handle(::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) {
    const char* why = ::dlerror();
    return absl::NotFoundError(
        fmt::format("NVML ({}) cannot be loaded: {}", path, why != nullptr ? why : "unknown"));
  }
  return handle;
}

}  // namespace cohort::agent::nvml
