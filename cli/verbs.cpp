// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <string_view>

#include "commands.h"

namespace cohort::cli {
namespace {

struct VerbGroup {
  std::initializer_list<std::string_view> names;  ///< what Add registers on the app
  void (*add)(CLI::App&, int&);
};

// Every verb of `cohort`, by the function that registers it.
const VerbGroup kVerbGroups[] = {
    {{"submit"}, AddSubmitCommand},
    {{"run"}, AddRunCommand},
    {{"queue"}, AddQueueCommand},
    {{"history"}, AddHistoryCommand},
    {{"show"}, AddShowCommand},
    {{"cancel"}, AddCancelCommand},
    {{"hold", "release", "requeue", "checkpoint-done"}, AddControlCommands},
    {{"why"}, AddWhyCommand},
    {{"priority"}, AddPriorityCommand},
    {{"shares"}, AddSharesCommand},
    {{"nodes"}, AddNodesCommand},
    {{"drain", "resume"}, AddDrainCommands},
    {{"config"}, AddConfigCommands},
    {{"topology"}, AddTopologyCommands},
    {{"hostlist"}, AddHostlistCommands},
    {{"place"}, AddPlaceCommand},
};

}  // namespace

std::vector<std::string_view> VerbNames() {
  std::vector<std::string_view> out;
  for (const VerbGroup& group : kVerbGroups) out.insert(out.end(), group.names);
  return out;
}

void AddCommands(CLI::App& app, int& exit_code, std::string_view verb) {
  for (const VerbGroup& group : kVerbGroups) {
    if (std::ranges::find(group.names, verb) != group.names.end()) {
      group.add(app, exit_code);
      return;
    }
  }
  for (const VerbGroup& group : kVerbGroups) group.add(app, exit_code);
}

}  // namespace cohort::cli
