// SPDX-License-Identifier: Apache-2.0
#include "commands/slurm_commands.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include <fmt/format.h>

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

bool TakesCommand(std::string_view program) {
  return program == "sbatch" || program == "srun" || program == "salloc";
}

absl::StatusOr<std::vector<std::string>> ExpandLongOptions(const CLI::App& app,
                                                           std::span<const std::string> args,
                                                           bool stop_at_command) {
  const std::vector<const CLI::Option*> options =
      app.get_options([](const CLI::Option* o) { return o->nonpositional(); });
  const auto takes_value = [](const CLI::Option* o) { return o->get_items_expected_min() > 0; };
  std::vector<std::string> out(args.begin(), args.end());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::string& arg = out[i];
    if (arg == "--") break;
    if (arg.size() > 2 && arg.starts_with("--")) {
      const std::size_t eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? eq : eq - 2);
      const CLI::Option* exact = nullptr;
      std::vector<std::pair<const CLI::Option*, std::string>> prefixed;
      for (const CLI::Option* o : options) {
        for (const std::string& lname : o->get_lnames()) {
          if (lname == name) exact = o;
          if (lname.starts_with(name) &&
              std::ranges::none_of(prefixed, [&](const auto& p) { return p.first == o; })) {
            prefixed.emplace_back(o, lname);
          }
        }
      }
      const CLI::Option* found = exact;
      if (found == nullptr && prefixed.size() == 1) {
        found = prefixed.front().first;
        out[i] = "--" + prefixed.front().second +
                 (eq == std::string::npos ? std::string() : arg.substr(eq));
      } else if (found == nullptr && prefixed.size() > 1) {
        std::string possible;
        for (const auto& [o, lname] : prefixed) possible += " '--" + lname + "'";
        return absl::InvalidArgumentError(
            fmt::format("option '--{}' is ambiguous; possibilities:{}", name, possible));
      }
      if (found != nullptr && eq == std::string::npos && takes_value(found)) ++i;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      // -p gpu: the next word is the value; -pgpu and clusters are one word.
      const std::string letter(1, arg[1]);
      for (const CLI::Option* o : options) {
        const auto& snames = o->get_snames();
        if (arg.size() == 2 && std::ranges::find(snames, letter) != snames.end() &&
            takes_value(o)) {
          ++i;
        }
      }
      continue;
    }
    if (stop_at_command) break;
  }
  return out;
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
