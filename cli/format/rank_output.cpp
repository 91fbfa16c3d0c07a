// SPDX-License-Identifier: Apache-2.0
#include "format/rank_output.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iostream>
#include <system_error>

#include <fmt/format.h>

namespace cohort::cli {

RankOutput::RankOutput(std::filesystem::path folder, std::int64_t job_id, RankLabels labels)
    : folder_(std::move(folder)), prefix_(fmt::format("{}-", job_id)), labels_(labels) {}

void RankOutput::Discover() {
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder_, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix_)) continue;
    const std::size_t dot = name.rfind('.');
    if (dot == std::string::npos || dot <= prefix_.size()) continue;
    const std::string_view suffix = std::string_view(name).substr(dot);
    Stream stream = Stream::kOut;
    if (suffix == ".err") {
      stream = Stream::kErr;
    } else if (suffix != ".out") {
      continue;
    }
    int rank = 0;
    const char* first = name.data() + prefix_.size();
    const char* last = name.data() + dot;
    const auto [stop, parse_error] = std::from_chars(first, last, rank);
    if (parse_error != std::errc() || stop != last) continue;
    files_.try_emplace({rank, stream}, File{it->path(), 0, {}});
  }
}

void RankOutput::Read(int rank, Stream stream, File& file) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(file.path, error);
  if (error) return;
  if (size < file.offset) {  // truncated: the job started again
    file.offset = 0;
    file.partial.clear();
  }
  if (size == file.offset) return;
  std::ifstream in(file.path, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(file.offset));
  // In pieces, so that a rank that wrote gigabytes costs little memory.
  constexpr std::uintmax_t kPiece = 1 << 20;
  std::string piece;
  while (file.offset < size) {
    piece.resize(static_cast<std::size_t>(std::min(size - file.offset, kPiece)));
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    piece.resize(static_cast<std::size_t>(in.gcount()));
    if (piece.empty()) return;
    file.offset += piece.size();
    file.partial += piece;
    const std::size_t last_newline = file.partial.rfind('\n');
    if (last_newline == std::string::npos) continue;
    Print(rank, stream, std::string_view(file.partial).substr(0, last_newline + 1));
    file.partial.erase(0, last_newline + 1);
  }
}

void RankOutput::Print(int rank, Stream stream, std::string_view text) {
  std::ostream& out = stream == Stream::kOut ? std::cout : std::cerr;
  if (labels_ == RankLabels::kNone) {
    out << text;
  } else {
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      end = end == std::string_view::npos ? text.size() : end + 1;
      out << rank << ": " << text.substr(start, end - start);
      start = end;
    }
  }
  out.flush();
}

void RankOutput::Poll() {
  Discover();
  for (auto& [key, file] : files_) Read(key.first, key.second, file);
}

void RankOutput::Flush() {
  Poll();
  for (auto& [key, file] : files_) {
    if (file.partial.empty()) continue;
    Print(key.first, key.second, file.partial + "\n");
    file.partial.clear();
  }
}

}  // namespace cohort::cli
