// SPDX-License-Identifier: Apache-2.0
#include "exec_again.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace cohort::controller {
namespace {

// The command line of the controller again, listening where it listens now.
std::vector<std::string> ArgumentsAgain(int argc, char** argv, const ServerExit& end) {
  std::vector<std::string> out{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--port" || arg == "--http-port") {
      ++i;  // and its value
      continue;
    }
    if (arg.starts_with("--port=") || arg.starts_with("--http-port=")) continue;
    out.emplace_back(arg);
  }
  if (end.wait_for_database &&
      std::find(out.begin(), out.end(), "--wait-for-database") == out.end()) {
    out.emplace_back("--wait-for-database");
  }
  out.insert(out.end(), {"--port", std::to_string(end.port)});
  if (end.http_port >= 0) out.insert(out.end(), {"--http-port", std::to_string(end.http_port)});
  return out;
}

// Marks every descriptor but the standard three close-on-exec, so that the
// program run again does not find its own ports still bound by the image
// before it.
void CloseOnExec() {
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  std::error_code error;  // kernels before 5.11
  std::vector<int> open;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    char* end = nullptr;
    const long fd = std::strtol(entry.path().filename().c_str(), &end, 10);
    if (*end == '\0' && fd > 2) open.push_back(static_cast<int>(fd));
  }
  for (const int fd : open) (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

}  // namespace

void FlushLogs() {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& logger) { logger->flush(); });
  if (spdlog::logger* logger = spdlog::default_logger_raw()) logger->flush();
}

int ExecuteAgain(int argc, char** argv, const ServerExit& end) {
  std::vector<std::string> again = ArgumentsAgain(argc, argv, end);
  std::vector<char*> pointers;
  for (std::string& arg : again) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  spdlog::info("controller_restarting reason=\"{}\"", end.again_because);
  FlushLogs();
  CloseOnExec();
  ::execv("/proc/self/exe", pointers.data());
  std::cerr << fmt::format("cohort-controller: cannot execute itself again ({}); start it again\n",
                           std::strerror(errno));
  return 1;
}

}  // namespace cohort::controller
