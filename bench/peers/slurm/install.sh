#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages of the Slurm peer (bench/peers/slurm/) when
# missing: munge, slurmctld, slurmd and the clients, Slurm 22.05 on Debian 12,
# and its plugins package for `srun --mpi=pmix` (mpi_pmix_v4).
# Called by `make bench` only; `make build` and `make test` never install Slurm.
# Idempotent: apt is not touched when everything is installed.
set -euo pipefail
packages=(munge slurm-wlm slurmctld slurmd slurm-client slurm-wlm-plugins)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "slurm peer: installing ${missing[*]}"
sudo=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "slurm peer: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
    exit 1
  }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
