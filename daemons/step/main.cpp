// SPDX-License-Identifier: Apache-2.0
// `cohort-stepd FOLDER`: starts and reaps one launch's ranks for cohort-agent.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "step_daemon.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fputs(
        "usage: cohort-stepd FOLDER\n"
        "Started by cohort-agent, once per launch of a job on a node: "
        "runs the ranks described "
        "by FOLDER/launch.json, records their start and exit in "
        "FOLDER/events, and outlives the "
        "agent. Not meant to be run by hand.\n",
        argc == 2 ? stdout : stderr);
    return argc == 2 ? 0 : 2;
  }
  // Ranks' stdio is mapped onto 0-2: files opened here must not take them.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  }
  return cohort::step::RunStepDaemon(argv[1]);
}
