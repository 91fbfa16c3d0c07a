// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "commands/commands.h"

namespace cohort::cli {

int ExpandHostlists(const std::vector<std::string>& lists) {
  for (const std::string& list : lists) {
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(list);
    if (!names.ok()) {
      std::cerr << fmt::format("cohort: {}\n", names.status());
      return 1;
    }
    for (const std::string& name : *names) std::cout << name << '\n';
  }
  return 0;
}

int CompressHostlists(const std::vector<std::string>& items) {
  std::vector<std::string> all;
  for (const std::string& item : items) {
    absl::StatusOr<std::vector<std::string>> expanded = hostlist::Expand(item);
    if (!expanded.ok()) {
      std::cerr << fmt::format("cohort: {}\n", expanded.status());
      return 1;
    }
    all.insert(all.end(), expanded->begin(), expanded->end());
  }
  std::cout << hostlist::Compress(all) << '\n';
  return 0;
}

void AddHostlistCommands(CLI::App& app, int& exit_code) {
  CLI::App* hostlist = app.add_subcommand("hostlist", "expand and compress Slurm hostlists");
  hostlist->require_subcommand(1);

  auto lists = std::make_shared<std::vector<std::string>>();
  auto expand = hostlist->add_subcommand("expand", "print every name of the hostlists, one a line");
  expand->add_option("hostlist", *lists, "hostlists such as gpu[001-064]")->required();
  expand->callback([lists, &exit_code] { exit_code = ExpandHostlists(*lists); });

  auto names = std::make_shared<std::vector<std::string>>();
  auto compress =
      hostlist->add_subcommand("compress", "fold names (or hostlists) into the shortest hostlist");
  compress->add_option("names", *names, "names or hostlists; duplicates are dropped")->required();
  compress->callback([names, &exit_code] { exit_code = CompressHostlists(*names); });
}

}  // namespace cohort::cli
