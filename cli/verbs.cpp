// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "commands.h"

namespace cohort::cli {
namespace {

enum class Reach : bool { kOffline, kController };

struct VerbGroup {
  std::initializer_list<std::string_view> names;  ///< what Add registers on the app
  void (*add)(CLI::App&, int&);
  Reach reach;  ///< whether its verbs call the controller
};

// Every verb of `cohort`, by the function that registers it.
const VerbGroup kVerbGroups[] = {
    {{"submit"}, AddSubmitCommand, Reach::kController},
    {{"run"}, AddRunCommand, Reach::kController},
    {{"queue"}, AddQueueCommand, Reach::kController},
    {{"history"}, AddHistoryCommand, Reach::kController},
    {{"show"}, AddShowCommand, Reach::kController},
    {{"cancel"}, AddCancelCommand, Reach::kController},
    {{"hold", "release", "requeue", "checkpoint-done"}, AddControlCommands, Reach::kController},
    {{"why"}, AddWhyCommand, Reach::kController},
    {{"priority"}, AddPriorityCommand, Reach::kController},
    {{"shares"}, AddSharesCommand, Reach::kController},
    {{"nodes"}, AddNodesCommand, Reach::kController},
    {{"drain", "resume"}, AddDrainCommands, Reach::kController},
    {{"config"}, AddConfigCommands, Reach::kOffline},
    // Alone, the live tree; `topology show` reads files.
    {{"topology"}, AddTopologyCommands, Reach::kController},
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

bool CallsController(std::string_view verb) {
  const VerbGroup* group = GroupOf(verb);
  return group != nullptr && group->reach == Reach::kController;
}

}  // namespace cohort::cli
