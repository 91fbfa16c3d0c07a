// SPDX-License-Identifier: Apache-2.0
#pragma once

/// Invariant checks. COHORT_CHECK is always on: use it where continuing would
/// corrupt allocations. COHORT_DCHECK compiles away in release builds. Never
/// use either on input from a file, the network or an agent: that is an error
/// reply, not a crash.

namespace cohort::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const char* message);
}  // namespace cohort::internal

#define COHORT_CHECK(condition, message)                                            \
  do {                                                                               \
    if (!(condition)) [[unlikely]] {                                                 \
      ::cohort::internal::CheckFailed(__FILE__, __LINE__, #condition, (message));    \
    }                                                                                \
  } while (false)

#ifdef NDEBUG
#define COHORT_DCHECK(condition, message) \
  do {                                    \
  } while (false && (condition))
#else
#define COHORT_DCHECK(condition, message) COHORT_CHECK(condition, message)
#endif
