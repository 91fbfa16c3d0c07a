// SPDX-License-Identifier: Apache-2.0
// `cohort-image pull ...`: pulls a container image into the node's cache for
// cohort-stepd (which runs it before a containerized step) and cohort-agent.
#include "image_command.h"

int main(int argc, char** argv) { return cohort::image::RunImageCommand(argc, argv); }
