// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <linux/bpf.h>
#include <sys/types.h>

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

/// cgroup v2's device controller: an eBPF program of type
/// BPF_PROG_TYPE_CGROUP_DEVICE attached to a cgroup, asked at every open of
/// a device file by a process in it. The one made here refuses a list of
/// character devices and allows everything else, which is what a launch
/// needs: the GPUs of the node it was not granted (cgroup v1 writes the same
/// list to devices.deny).
namespace cohort::step {

/// The program: 1 (allow) unless the access is to one of `denied`'s
/// character devices, 0 (refuse) then. Pure.
[[nodiscard]] std::vector<bpf_insn> DenyDevicesProgram(std::span<const dev_t> denied);

/// Whether this process may load a device filter (root, or CAP_BPF, and a
/// kernel with cgroup BPF): loads one and lets it go. The errno's status
/// otherwise.
[[nodiscard]] absl::Status CheckDeviceFilter();

/// Loads DenyDevicesProgram(`denied`) and attaches it to the cgroup v2
/// folder `cgroup` (with BPF_F_ALLOW_MULTI, so that programs of the cgroups
/// above still apply). The program stays attached until the cgroup is
/// removed. Nothing to do for an empty list. The errno's status, naming the
/// step (load or attach) and, for a program the kernel refuses, its
/// verifier's log.
[[nodiscard]] absl::Status AttachDeviceFilter(const std::string& cgroup,
                                              std::span<const dev_t> denied);

}  // namespace cohort::step
