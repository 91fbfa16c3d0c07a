// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "unique_fd.h"

/// Opening a file the job's owner names, as the owner: cohort-image runs as
/// root (it writes the node's cache), and must read nothing for a user
/// that the user could not read themselves (their credentials file, a
/// squashfs image, an OCI layout).
namespace cohort::image {

/// Opens `path` read-only (O_NONBLOCK: a FIFO in a file's place does not
/// hang). With `as_uid` set and the process root, as that user (their
/// groups: setgroups, setegid, seteuid) and root again right after; the
/// program aborts if it cannot turn back. `what` names the file in errors
/// ("the credentials file"). NotFound when it does not exist or the uid is
/// unknown, PermissionDenied when the user may not open it, Unavailable
/// otherwise. Changes the process's identity for a moment: call it before
/// starting threads.
[[nodiscard]] absl::StatusOr<UniqueFd> OpenAsUser(const std::string& path,
                                                  std::optional<uid_t> as_uid,
                                                  std::string_view what);

}  // namespace cohort::image
