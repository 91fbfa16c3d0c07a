// SPDX-License-Identifier: Apache-2.0
#include "rpc/request_bounds.h"

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>

namespace cohort::controller {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

struct OwnBound {
  std::string_view field;
  FieldBound bound;
};

constexpr std::size_t kKiB = 1024;

// The fields whose bounds are not the defaults. A job's strings are shown
// in every listing (`cohort queue` carries each pending job's name and
// comment), so the ones shown are short; what the kernel takes bounds
// what is executed (MAX_ARG_STRLEN is 128 KiB per argument or variable).
// A batch script may be 2 MiB (Slurm's max_script_size is 4 MB), so that a
// job's whole spec still fits the 4 MiB of one message.
constexpr std::array kOwnBounds{
    OwnBound{"cohort.v1.JobSpec.name", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.comment", {.bytes = kKiB}},
    OwnBound{"cohort.v1.JobSpec.wckey", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.mail_type", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.mail_user", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.partition", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.account", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.qos", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.gpu_type", {.bytes = 256}},
    OwnBound{"cohort.v1.JobSpec.open_mode", {.bytes = 16}},
    OwnBound{"cohort.v1.JobSpec.mpi", {.bytes = 16}},
    OwnBound{"cohort.v1.StartStepRequest.mpi", {.bytes = 16}},
    OwnBound{"cohort.v1.ContainerSpec.image", {.bytes = 512}},
    OwnBound{"cohort.v1.ContainerSpec.mounts", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.ContainerSpec.workdir", {.bytes = 4 * kKiB}},
    OwnBound{"cohort.v1.ContainerSpec.name", {.bytes = 128}},
    OwnBound{"cohort.v1.ContainerSpec.save", {.bytes = 4 * kKiB}},
    OwnBound{"cohort.v1.ContainerSpec.env", {.bytes = 16 * kKiB}},
    OwnBound{"cohort.v1.JobSpec.features", {.bytes = 256, .entries = 64}},
    OwnBound{"cohort.v1.JobSpec.script", {.bytes = 2048 * kKiB}},
    OwnBound{"cohort.v1.JobSpec.argv", {.bytes = 128 * kKiB, .entries = 4096}},
    OwnBound{"cohort.v1.JobSpec.env", {.entries = 4096}},
    OwnBound{"cohort.v1.JobSpec.nodelist", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.JobSpec.exclude", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.EnvVar.name", {.bytes = kKiB}},
    OwnBound{"cohort.v1.EnvVar.value", {.bytes = 128 * kKiB}},
    OwnBound{"cohort.v1.StartStepRequest.name", {.bytes = 256}},
    OwnBound{"cohort.v1.StartStepRequest.argv", {.bytes = 128 * kKiB, .entries = 4096}},
    OwnBound{"cohort.v1.StartStepRequest.env", {.entries = 4096}},
    OwnBound{"cohort.v1.StartStepRequest.nodelist", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.UpdateNodeRequest.nodes", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.UpdateNodeRequest.reason", {.bytes = kKiB}},
    OwnBound{"cohort.v1.UpdatePartitionRequest.name", {.bytes = 256}},
    OwnBound{"cohort.v1.UpdatePartitionRequest.state", {.bytes = 16}},
    OwnBound{"cohort.v1.JobSpec.reservation", {.bytes = 64}},
    OwnBound{"cohort.v1.UpdateReservationRequest.verb", {.bytes = 16}},
    OwnBound{"cohort.v1.UpdateReservationRequest.name", {.bytes = 256}},
    OwnBound{"cohort.v1.UpdateReservationRequest.nodes", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.UpdateReservationRequest.users", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.UpdateReservationRequest.accounts", {.bytes = 64 * kKiB}},
    OwnBound{"cohort.v1.UpdateReservationRequest.partition", {.bytes = 256}},
    OwnBound{"cohort.v1.UpdateReservationRequest.flags", {.bytes = 256}},
    OwnBound{"cohort.v1.UpdateAccountsRequest.verb", {.bytes = 16}},
    OwnBound{"cohort.v1.UpdateAccountsRequest.entity", {.bytes = 16}},
    OwnBound{"cohort.v1.UpdateAccountsRequest.names", {.bytes = 64, .entries = 1000}},
    OwnBound{"cohort.v1.UpdateAccountsRequest.accounts", {.bytes = 64, .entries = 1000}},
    OwnBound{"cohort.v1.UpdateAccountsRequest.set", {.bytes = 1100, .entries = 32}},
};

// The first field over its bound: where (a path such as `env[3].value`,
// built as the walk unwinds, so that a request within its bounds formats
// nothing) and by what.
struct Over {
  std::string path;
  std::string what;
};

std::optional<Over> CheckString(const std::string& value, const FieldBound& bound) {
  if (value.size() <= bound.bytes) return std::nullopt;
  return Over{{}, fmt::format("is {} bytes long; at most {} are taken", value.size(), bound.bytes)};
}

std::optional<Over> Within(std::optional<Over> over, std::string_view field, int index) {
  if (!over) return over;
  const std::string_view dot = over->path.empty() ? "" : ".";
  over->path = index < 0 ? fmt::format("{}{}{}", field, dot, over->path)
                         : fmt::format("{}[{}]{}{}", field, index, dot, over->path);
  return over;
}

// What a walk checks of one message type: its strings, its repeated
// fields and its messages, each with its bound, looked up once per type
// (ListFields and the table's names for every message walked cost more
// than the rest of a submission's validation).
struct Checked {
  const FieldDescriptor* field;
  FieldBound bound;
  bool text;
  bool nested;
};

const std::vector<Checked>& PlanOf(const google::protobuf::Descriptor& type) {
  static std::mutex mutex;
  static std::unordered_map<const google::protobuf::Descriptor*, std::vector<Checked>> plans;
  const std::lock_guard lock(mutex);
  auto [it, added] = plans.try_emplace(&type);
  if (added) {
    for (int i = 0; i < type.field_count(); ++i) {
      const FieldDescriptor* field = type.field(i);
      const bool text = field->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
      const bool nested = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
      if (!text && !nested && !field->is_repeated()) continue;
      it->second.push_back({field, BoundOf(field->full_name()), text, nested});
    }
  }
  return it->second;  // never erased: the reference outlives the lock
}

// Checks `message` and what it holds against their bounds.
std::optional<Over> Walk(const Message& message, int depth) {
  // The protocol nests a few levels; a deeper message is no request.
  if (depth > 16) return Over{{}, "is nested too deeply"};
  const Reflection& reflection = *message.GetReflection();
  std::string scratch;
  for (const Checked& checked : PlanOf(*message.GetDescriptor())) {
    const FieldDescriptor* field = checked.field;
    if (!field->is_repeated()) {
      std::optional<Over> over;
      if (checked.text) {
        over = CheckString(reflection.GetStringReference(message, field, &scratch), checked.bound);
      } else if (reflection.HasField(message, field)) {
        over = Walk(reflection.GetMessage(message, field), depth + 1);
      }
      if (over) return Within(std::move(over), field->name(), -1);
      continue;
    }
    const int size = reflection.FieldSize(message, field);
    if (static_cast<std::size_t>(size) > checked.bound.entries) {
      return Within(
          Over{{},
               fmt::format("has {} entries; at most {} are taken", size, checked.bound.entries)},
          field->name(), -1);
    }
    if (!checked.text && !checked.nested) continue;
    for (int i = 0; i < size; ++i) {
      std::optional<Over> over =
          checked.text
              ? CheckString(reflection.GetRepeatedStringReference(message, field, i, &scratch),
                            checked.bound)
              : Walk(reflection.GetRepeatedMessage(message, field, i), depth + 1);
      if (over) return Within(std::move(over), field->name(), i);
    }
  }
  return std::nullopt;
}

}  // namespace

FieldBound BoundOf(std::string_view full_name) {
  for (const OwnBound& own : kOwnBounds) {
    if (own.field == full_name) return own.bound;
  }
  return FieldBound{};
}

absl::Status CheckRequestBounds(const Message& message) {
  std::optional<Over> over = Walk(message, 0);
  if (!over) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{} {}; shorten it (the bounds are in docs/operations.md, \"Resource bounds\")",
                  over->path.empty() ? message.GetDescriptor()->name() : over->path, over->what));
}

}  // namespace cohort::controller
