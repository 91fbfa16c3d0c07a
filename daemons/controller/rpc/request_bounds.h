// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/status.h"

/// The bounds on what a client or an agent may send, checked before any
/// work sized by it (docs/operations.md, "Resource bounds"). Every string
/// and every repeated field of every request is bounded: by the table in
/// request_bounds.cpp where a field has a bound of its own, else by the
/// defaults below, so that a field added to the protocol is bounded from
/// its first day.
namespace cohort::controller {

/// A string field without a bound of its own: 4 KiB (PATH_MAX).
inline constexpr std::size_t kDefaultStringBytes = 4096;
/// A repeated field without a bound of its own.
inline constexpr std::size_t kDefaultRepeated = 65536;
/// The largest message either gRPC listener takes (gRPC's own default).
inline constexpr int kMaxMessageBytes = 4 << 20;

/// InvalidArgument naming the first field of `message` (as
/// `spec.env[3].value`) over its bound, the bound and what to do; OK
/// otherwise. Walks the message with protobuf's reflection; any thread.
[[nodiscard]] absl::Status CheckRequestBounds(const google::protobuf::Message& message);

/// The bounds of one field: bytes of a string (of each, when repeated)
/// and entries of a repeated field.
struct FieldBound {
  std::size_t bytes = kDefaultStringBytes;
  std::size_t entries = kDefaultRepeated;
};

/// The bounds of the field with this full protobuf name
/// (`cohort.v1.JobSpec.name`): its own, or the defaults.
[[nodiscard]] FieldBound BoundOf(std::string_view full_name);

}  // namespace cohort::controller
