// SPDX-License-Identifier: Apache-2.0
#include "commands/slurm_commands.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace cohort::cli {
namespace {

struct FrontEnd {
  std::string_view name;
  void (*add)(CLI::App&, int&, CommandWords);
};

template <void (*Add)(CLI::App&, int&)>
void FixedOptions(CLI::App& app, int& exit_code, CommandWords /*words*/) {
  Add(app, exit_code);
}

constexpr std::array kFrontEnds = {
    FrontEnd{"sbatch", AddSbatchCommand},
    FrontEnd{"srun", AddSrunCommand},
    FrontEnd{"salloc", AddSallocCommand},
    FrontEnd{"squeue", FixedOptions<AddSqueueCommand>},
    FrontEnd{"scancel", FixedOptions<AddScancelCommand>},
    FrontEnd{"sinfo", FixedOptions<AddSinfoCommand>},
    FrontEnd{"sacct", FixedOptions<AddSacctCommand>},
    FrontEnd{"sstat", FixedOptions<AddSstatCommand>},
    FrontEnd{"scontrol", FixedOptions<AddScontrolCommand>},
    FrontEnd{"sprio", FixedOptions<AddSprioCommand>},
    FrontEnd{"sshare", FixedOptions<AddSshareCommand>},
    FrontEnd{"sacctmgr", FixedOptions<AddSacctmgrCommand>},
    FrontEnd{"sreport", FixedOptions<AddSreportCommand>},
};

constexpr std::array<std::string_view, kFrontEnds.size()> kNames = [] {
  std::array<std::string_view, kFrontEnds.size()> names{};
  for (std::size_t i = 0; i < kFrontEnds.size(); ++i) names[i] = kFrontEnds[i].name;
  return names;
}();

}  // namespace

std::span<const std::string_view> SlurmCommandNames() { return kNames; }

bool IsSlurmCommand(std::string_view program) {
  return std::ranges::find(kNames, program) != kNames.end();
}

void AddSlurmCommand(CLI::App& app, std::string_view program, int& exit_code, CommandWords words) {
  for (const FrontEnd& front_end : kFrontEnds) {
    if (front_end.name == program) front_end.add(app, exit_code, words);
  }
}

int SlurmStatus(int cohort_status) { return cohort_status == 0 ? 0 : 1; }

void RefuseFlags(CLI::App& app, std::string names, std::string why) {
  const std::string shown = names;
  app.add_flag_callback(
         std::move(names), [shown, why] { throw CLI::ValidationError(shown, why); },
         "refused: " + why)
      ->group("");
}

}  // namespace cohort::cli
