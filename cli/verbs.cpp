// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "commands.h"

namespace cohort::cli {
namespace {

// How a verb reaches the controller: not at all, by unary calls only, or
// with a stream too (which only gRPC's C++ stack carries).
enum class Reach { kOffline, kUnary, kStream };

struct VerbGroup {
  std::initializer_list<std::string_view> names;  ///< what Add registers on the app
  void (*add)(CLI::App&, int&);
  Reach reach;
};

// Every verb of `cohort`, by the function that registers it.
const VerbGroup kVerbGroups[] = {
    {{"submit"}, AddSubmitCommand, Reach::kUnary},
    {{"run"}, AddRunCommand, Reach::kStream},
    {{"queue"}, AddQueueCommand, Reach::kUnary},
    {{"history"}, AddHistoryCommand, Reach::kUnary},
    {{"show"}, AddShowCommand, Reach::kUnary},
    {{"cancel"}, AddCancelCommand, Reach::kUnary},
    {{"hold", "release", "requeue", "checkpoint-done"}, AddControlCommands, Reach::kUnary},
    {{"why"}, AddWhyCommand, Reach::kUnary},
    {{"priority"}, AddPriorityCommand, Reach::kUnary},
    {{"shares"}, AddSharesCommand, Reach::kUnary},
    {{"nodes"}, AddNodesCommand, Reach::kUnary},
    {{"drain", "resume"}, AddDrainCommands, Reach::kUnary},
    {{"config"}, AddConfigCommands, Reach::kOffline},
    // Alone, the live tree; `topology show` reads files.
    {{"topology"}, AddTopologyCommands, Reach::kUnary},
    {{"hostlist"}, AddHostlistCommands, Reach::kOffline},
    {{"place"}, AddPlaceCommand, Reach::kOffline},
};

const VerbGroup* GroupOf(std::string_view verb) {
  for (const VerbGroup& group : kVerbGroups) {
    if (std::ranges::find(group.names, verb) != group.names.end()) return &group;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string_view> VerbNames() {
  std::vector<std::string_view> out;
  for (const VerbGroup& group : kVerbGroups) out.insert(out.end(), group.names);
  return out;
}

void AddCommands(CLI::App& app, int& exit_code, std::string_view verb) {
  if (const VerbGroup* group = GroupOf(verb)) {
    group->add(app, exit_code);
    return;
  }
  for (const VerbGroup& group : kVerbGroups) group.add(app, exit_code);
}

bool OpensStream(std::string_view verb) {
  const VerbGroup* group = GroupOf(verb);
  return group != nullptr && group->reach == Reach::kStream;
}

}  // namespace cohort::cli
