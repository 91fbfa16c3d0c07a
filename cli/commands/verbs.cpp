// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "commands/commands.h"

namespace cohort::cli {
namespace {

struct VerbGroup {
  std::initializer_list<std::string_view> names;  ///< what Add registers on the app
  void (*add)(CLI::App&, int&, CommandWords);     ///< given the words after the verb
};

// A verb whose options do not depend on the words given.
template <void (*Add)(CLI::App&, int&)>
void Fixed(CLI::App& app, int& exit_code, CommandWords /*words*/) {
  Add(app, exit_code);
}

// Every verb of `cohort`, by the function that registers it.
const VerbGroup kVerbGroups[] = {
    {{"submit"}, AddSubmitCommand},
    {{"run"}, AddRunCommand},
    {{"alloc"}, AddAllocCommand},
    {{"queue"}, Fixed<AddQueueCommand>},
    {{"history"}, Fixed<AddHistoryCommand>},
    {{"show"}, Fixed<AddShowCommand>},
    {{"cancel"}, Fixed<AddCancelCommand>},
    {{"hold", "release", "requeue", "checkpoint-done"}, Fixed<AddControlCommands>},
    {{"why"}, Fixed<AddWhyCommand>},
    {{"priority"}, Fixed<AddPriorityCommand>},
    {{"shares"}, Fixed<AddSharesCommand>},
    {{"nodes"}, Fixed<AddNodesCommand>},
    {{"drain", "down", "resume"}, Fixed<AddDrainCommands>},
    {{"token"}, Fixed<AddTokenCommand>},
    {{"reconfigure"}, Fixed<AddReconfigureCommand>},
    {{"config"}, Fixed<AddConfigCommands>},
    // Alone, the live tree; `topology show` reads files.
    {{"topology"}, Fixed<AddTopologyCommands>},
    {{"hostlist"}, Fixed<AddHostlistCommands>},
    {{"place"}, Fixed<AddPlaceCommand>},
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

}  // namespace cohort::cli
