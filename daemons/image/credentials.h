// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

/// Registry logins in enroot's credentials file
/// (~/.config/enroot/.credentials): netrc-like entries
/// `machine HOST login USER password PASS`, their words separated by spaces
/// or newlines, `#` starting a comment to the end of the line, and a
/// `default login USER password PASS` entry for every other host.
namespace cohort::image {

/// The largest credentials file read.
inline constexpr std::size_t kMaxCredentialsBytes = 1 << 20;

/// One login. `machine` is empty for the default entry.
struct Credential {
  std::string machine;
  std::string login;
  std::string password;
};

/// Parses the file's text. InvalidArgument naming `path`, the line and what
/// is wrong (never a password) for an unknown word, a word without its value,
/// or an entry without login or password. Pure.
[[nodiscard]] absl::StatusOr<std::vector<Credential>> ParseCredentials(std::string_view text,
                                                                       std::string_view path);

/// The login for `host` (HOST or HOST:PORT): an entry for HOST:PORT, then
/// one for HOST, then the default. With `user` set, only entries with that
/// login count. nullptr when none does. Pure.
[[nodiscard]] const Credential* FindCredential(const std::vector<Credential>& credentials,
                                               std::string_view host, std::string_view user);

/// Reads the credentials file at `path`. With `as_uid` set and the process
/// root, opens it as that user (its primary group from getpwuid_r, no
/// supplementary groups: setgroups, setegid, seteuid) and turns back into
/// root right after, so that root reads only what the user may read.
/// PermissionDenied when the user may not read it; FailedPrecondition for
/// something other than a regular file or a file over kMaxCredentialsBytes;
/// NotFound when it does not exist or the uid is unknown; Unavailable
/// otherwise. Changes the process's identity for a moment: call it before
/// starting threads.
[[nodiscard]] absl::StatusOr<std::string> ReadCredentialsFile(const std::string& path,
                                                              std::optional<uid_t> as_uid);

}  // namespace cohort::image
