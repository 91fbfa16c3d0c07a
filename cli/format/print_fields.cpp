// SPDX-License-Identifier: Apache-2.0
#include "format/print_fields.h"

#include <cstdlib>

#include <fmt/format.h>

namespace cohort::cli {

void AddFieldsStyleOptions(CLI::App& app, FieldsStyle& style) {
  app.add_flag("-n,--noheader", style.no_header, "leave out the header");
  app.add_flag("-p,--parsable", style.parsable, "'|' after each field");
  app.add_flag("-P,--parsable2", style.parsable2, "'|' between fields");
}

void PrintFields(const FieldsStyle& style, const std::vector<FieldColumn>& columns,
                 const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t i = 0; i < cells.size() && i < columns.size(); ++i) {
      if (style.Parsable()) {
        text += cells[i];
        if (style.parsable || i + 1 < cells.size()) text += '|';
        continue;
      }
      const int width = columns[i].width;
      const auto w = static_cast<std::size_t>(std::abs(width));
      const std::string cell = cells[i].substr(0, w);
      text += width < 0 ? fmt::format("{:<{}} ", cell, w) : fmt::format("{:>{}} ", cell, w);
    }
    out << text << '\n';
  };
  if (!style.no_header) {
    std::vector<std::string> names;
    std::vector<std::string> dashes;
    for (const FieldColumn& column : columns) {
      names.push_back(column.name);
      dashes.emplace_back(static_cast<std::size_t>(std::abs(column.width)), '-');
    }
    line(names);
    if (!style.Parsable()) line(dashes);
  }
  for (const std::vector<std::string>& row : rows) line(row);
}

}  // namespace cohort::cli
