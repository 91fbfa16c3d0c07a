// SPDX-License-Identifier: Apache-2.0
// `cohort`: the command line of the Cohort scheduler.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpc/grpc.h>
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  // One malloc arena: gRPC's few short-lived threads would each map and
  // fault in a heap of their own, a large part of a command's time.
  ::mallopt(M_ARENA_MAX, 1);
  const std::vector<std::string> words(argv + std::min(argc, 1), argv + argc);
  const std::string_view verb = words.empty() ? std::string_view() : words.front();
  // Unary calls need none of gRPC's C++ stack (controller_client.h). A
  // command that opens a stream starts gRPC (its threads and plugins,
  // ~1.5 ms) on a second thread while it reads its command line; the
  // channel it makes later waits for that start to finish. The process
  // always ends with _Exit, so this thread is never joined.
  std::thread start_grpc;
  if (cohort::cli::OpensStream(verb)) start_grpc = std::thread([] { grpc_init(); });
  CLI::App app{"cohort: submit, inspect and manage jobs on a Cohort GPU cluster", "cohort"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cohort 0.1.0");
  int exit_code = 0;
  cohort::cli::AddCommands(app, exit_code, words);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
  }
  // Every command has finished its work and closed what it wrote; skip the
  // teardown of gRPC's threads at exit (several milliseconds of a command
  // that takes a few tens), which could also meet gRPC still starting.
  std::fflush(nullptr);
  std::_Exit(exit_code);
}
