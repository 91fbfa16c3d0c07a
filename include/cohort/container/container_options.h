// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// The container a step's ranks run in, as pyxis's `--container-*` options
/// write it (docs/containers.md): the parsers of the options whose values
/// have a grammar, shared by the CLI (which checks what the user typed),
/// the controller (which checks what a client sent) and cohort-stepd (which
/// mounts it). Pure.
namespace cohort::container {

/// The most entries of --container-mounts; a step needs a handful.
inline constexpr int kMaxMounts = 64;
/// The most names of --container-env.
inline constexpr int kMaxEnvNames = 256;
/// The longest path a mount, --container-workdir or --container-save names.
inline constexpr std::size_t kMaxPath = 4096;

/// One bind mount into the container: `SRC[:DST[:FLAGS]]`, flags joined by
/// `+` (pyxis's; enroot's fstab joins them by `,`, which separates mounts
/// here). SRC is an absolute path of the node (a relative one is resolved
/// against the step's working directory by the stepd), or `tmpfs` (a fresh
/// tmpfs at DST); DST an absolute path in the container.
struct Mount {
  std::string source;
  std::string target;
  bool read_only = false;  ///< ro; rw (the default) clears it
  bool recursive = true;   ///< rbind (the default); bind: the source's own mount only
  bool nosuid = false;
  bool nodev = false;
  bool noexec = false;
  /// private, rprivate, slave, rslave, shared, rshared; empty: the node's
  std::string propagation;
  friend bool operator==(const Mount&, const Mount&) = default;
};

/// Parses --container-mounts (comma-separated entries). InvalidArgument
/// naming the entry, what is wrong and the accepted form, for an empty
/// entry, a target that is not absolute, an unknown flag, `..` in a path,
/// more than kMaxMounts entries or a path over kMaxPath.
[[nodiscard]] absl::StatusOr<std::vector<Mount>> ParseMounts(std::string_view text);

/// Writes mounts back as ParseMounts reads them.
[[nodiscard]] std::string FormatMounts(const std::vector<Mount>& mounts);

/// What --container-name's flag asks (pyxis's): kAuto joins the job's
/// container of that name on the node while another step runs in it, else
/// uses its files when there are some, else creates it; kCreate starts it
/// afresh from the image; kExec joins it, and fails when no step runs in
/// it; kNoExec never joins (a fresh instance of its files; refused while
/// another step runs in it); kNoCreate is kAuto that fails when there is
/// no such container.
enum class NameMode { kAuto, kCreate, kExec, kNoExec, kNoCreate };

struct ContainerName {
  std::string name;
  NameMode mode = NameMode::kAuto;
};

/// Parses `NAME[:auto|create|exec|no_exec|no_create]`. NAME is 1 to 64 of letters,
/// digits, `.`, `_` and `-`, not starting with `.` (it names a folder on
/// each node). InvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<ContainerName> ParseContainerName(std::string_view text);

/// The name of a mode as --container-name writes it ("auto", ...).
[[nodiscard]] std::string_view NameModeText(NameMode mode);

/// Parses --container-env: comma-separated variable names (letters, digits
/// and `_`, not starting with a digit). InvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ParseEnvNames(std::string_view text);

/// Checks --container-workdir: an absolute path without `..`, at most
/// kMaxPath bytes. InvalidArgument otherwise.
[[nodiscard]] absl::Status CheckWorkdir(std::string_view path);

/// Checks --container-save: a file on the node (absolute, or relative to
/// the step's working directory), not a folder (no trailing `/`), without
/// a NUL, at most kMaxPath bytes. InvalidArgument otherwise.
[[nodiscard]] absl::Status CheckSavePath(std::string_view path);

}  // namespace cohort::container
