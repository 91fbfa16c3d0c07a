// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <dlfcn.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

/// NVIDIA's NVML, loaded at run time with dlopen: never a build dependency,
/// and a node without NVIDIA's driver simply has none. What of nvml.h the
/// agent uses is restated where it is used.
namespace cohort::agent::nvml {

using Return = int;
inline constexpr Return kSuccess = 0;
struct Device;
/// NVML numbers at most this many GPUs here.
inline constexpr unsigned kMaxGpus = 64;

struct LibraryCloser {
  void operator()(void* handle) const { ::dlclose(handle); }
};
using Library = std::unique_ptr<void, LibraryCloser>;

/// The library dlopen tries: COHORT_NVML_LIBRARY when set (tests point it
/// at a stand-in), else libnvidia-ml.so.1.
[[nodiscard]] std::string LibraryPath();

/// dlopens `path`; NotFound (with dlerror's words) when it cannot.
[[nodiscard]] absl::StatusOr<Library> Load(const std::string& path);

/// The function `name` of `library`, or null.
template <typename Function>
Function* Symbol(const Library& library, const char* name) {
  return reinterpret_cast<Function*>(
      ::dlsym(library.get(), name));  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

}  // namespace cohort::agent::nvml
