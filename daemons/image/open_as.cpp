// SPDX-License-Identifier: Apache-2.0
#include "open_as.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "run_as.h"

namespace cohort::image {
namespace {

// Restores root's identity when it goes out of scope.
class RootIdentity {
 public:
  RootIdentity() : gid_(::getegid()) {
    const int count = ::getgroups(0, nullptr);
    groups_.resize(count > 0 ? static_cast<std::size_t>(count) : 0);
    if (count > 0 && ::getgroups(count, groups_.data()) < 0) groups_.clear();
  }
  ~RootIdentity() {
    // Without root back the program must not go on: whatever it did next
    // would run as the user, or half as each.
    if (::seteuid(0) != 0 || ::setegid(gid_) != 0 ||
        ::setgroups(groups_.size(), groups_.data()) != 0) {
      std::abort();
    }
  }
  RootIdentity(const RootIdentity&) = delete;
  RootIdentity& operator=(const RootIdentity&) = delete;

 private:
  gid_t gid_;
  std::vector<gid_t> groups_;
};

absl::StatusOr<UniqueFd> OpenAsCaller(const std::string& path, std::string_view what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    const int error = errno;
    const std::string text = fmt::format("cannot open {} {}: {}", what, path, std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(text);
    if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(text);
    return absl::UnavailableError(text);
  }
  return fd;
}

}  // namespace

absl::StatusOr<UniqueFd> OpenAsUser(const std::string& path, std::optional<uid_t> as_uid,
                                    std::string_view what) {
  if (!as_uid.has_value() || ::geteuid() != 0) return OpenAsCaller(path, what);
  absl::StatusOr<step::Account> user = step::LookupAccount(*as_uid, "this node");
  if (!user.ok()) return user.status();
  RootIdentity root;
  if (::setgroups(user->groups.size(), user->groups.data()) != 0 || ::setegid(user->gid) != 0 ||
      ::seteuid(*as_uid) != 0) {
    return absl::UnavailableError(fmt::format("cannot take the identity of user {} to read {}: {}",
                                              *as_uid, path, std::strerror(errno)));
  }
  return OpenAsCaller(path, what);
}

}  // namespace cohort::image
