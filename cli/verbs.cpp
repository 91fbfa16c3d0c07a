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
  void (*add)(CLI::App&, int&, CommandWords);     ///< given the words after the verb
  Reach reach;
};

// A verb whose options do not depend on the words given.
template <void (*Add)(CLI::App&, int&)>
void Fixed(CLI::App& app, int& exit_code, CommandWords /*words*/) {
  Add(app, exit_code);
}

// Every verb of `cohort`, by the function that registers it.
const VerbGroup kVerbGroups[] = {
    {{"submit"}, AddSubmitCommand, Reach::kUnary},
    {{"run"}, AddRunCommand, Reach::kStream},
    {{"queue"}, Fixed<AddQueueCommand>, Reach::kUnary},
    {{"history"}, Fixed<AddHistoryCommand>, Reach::kUnary},
    {{"show"}, Fixed<AddShowCommand>, Reach::kUnary},
    {{"cancel"}, Fixed<AddCancelCommand>, Reach::kUnary},
    {{"hold", "release", "requeue", "checkpoint-done"}, Fixed<AddControlCommands>, Reach::kUnary},
    {{"why"}, Fixed<AddWhyCommand>, Reach::kUnary},
    {{"priority"}, Fixed<AddPriorityCommand>, Reach::kUnary},
    {{"shares"}, Fixed<AddSharesCommand>, Reach::kUnary},
    {{"nodes"}, Fixed<AddNodesCommand>, Reach::kUnary},
    {{"drain", "resume"}, Fixed<AddDrainCommands>, Reach::kUnary},
    {{"config"}, Fixed<AddConfigCommands>, Reach::kOffline},
    // Alone, the live tree; `topology show` reads files.
    {{"topology"}, Fixed<AddTopologyCommands>, Reach::kUnary},
    {{"hostlist"}, Fixed<AddHostlistCommands>, Reach::kOffline},
    {{"place"}, Fixed<AddPlaceCommand>, Reach::kOffline},
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

void AddCommands(CLI::App& app, int& exit_code, CommandWords words) {
  const std::string_view verb = words.empty() ? std::string_view() : words.front();
  if (const VerbGroup* group = GroupOf(verb)) {
    group->add(app, exit_code, words.subspan(1));
    return;
  }
  // Whichever verb CLI11 finds may parse any of the words.
  for (const VerbGroup& group : kVerbGroups) group.add(app, exit_code, words);
}

bool OpensStream(std::string_view verb) {
  const VerbGroup* group = GroupOf(verb);
  return group != nullptr && group->reach == Reach::kStream;
}

}  // namespace cohort::cli
