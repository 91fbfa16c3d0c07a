// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

/// The tables of sacctmgr and sreport, as Slurm's print_fields writes them.
namespace cohort::cli {

/// -n, -p and -P.
struct FieldsStyle {
  bool no_header = false;
  bool parsable = false;   ///< -p: '|' after every field
  bool parsable2 = false;  ///< -P: '|' between fields
  [[nodiscard]] bool Parsable() const { return parsable || parsable2; }
};

/// Registers -n/--noheader, -p/--parsable and -P/--parsable2.
void AddFieldsStyleOptions(CLI::App& app, FieldsStyle& style);

/// One column: its header and width (negative: left-justified).
struct FieldColumn {
  std::string name;
  int width = 10;
};

/// The header (with a line of dashes under it unless parsable; none with
/// -n), then the rows: each cell right-justified and cut to its width,
/// followed by a space; parsable, the cells whole with '|'.
void PrintFields(const FieldsStyle& style, const std::vector<FieldColumn>& columns,
                 const std::vector<std::vector<std::string>>& rows, std::ostream& out);

}  // namespace cohort::cli
