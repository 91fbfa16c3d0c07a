#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages that building, testing and running Cohort need.
# Idempotent: packages already installed are skipped, and apt is not touched at
# all when nothing is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # libraries
  libabsl-dev libboost-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libc-ares-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libhwloc-dev hwloc libsqlite3-dev sqlite3 libcli11-dev
  # topology.yaml, read with libyaml as Slurm reads it
  libyaml-dev
  # identity: MUNGE credentials (munged runs on every host of a cluster)
  libmunge-dev munge
  # the site's submit policy (job_submit.lua): Lua 5.4, its C++ build
  liblua5.4-dev
  # TLS: the CLI's client (static libssl) and the openssl tool that makes certificates
  libssl-dev openssl
  # HTTP/2 for the CLI (its static archive)
  libnghttp2-dev
  # the PostgreSQL state backend (libpq), and a real server for its tests
  libpq-dev postgresql-15
  # tests and benchmarks; PyTorch for the distributed training test (CPU, gloo)
  libgtest-dev libgmock-dev libbenchmark-dev python3-torch
  # MPI wire-up: OpenPMIx for cohort-stepd's PMIx server (srun --mpi=pmix); Open MPI
  # (mpirun, mpicc, mpi4py), MPICH, and Slurm's PMI-2 client library (what
  # Intel MPI loads) for tests/integration/mpi_test.sh
  libpmix-dev openmpi-bin libopenmpi-dev python3-mpi4py mpich libmpich-dev libpmi2-0-dev
  # containers: cohort-image pulls OCI images with libcurl and unpacks their
  # layers with libarchive, and .sqsh images with unsquashfs; the tests push
  # a busybox image to Debian's Distribution registry with htpasswd logins
  libcurl4-openssl-dev libarchive-dev squashfs-tools docker-registry busybox-static apache2-utils
  # a real Prometheus scrapes the controller's /metrics in the tests, curl reads it and a
  # headless Chromium loads its dashboard
  prometheus curl chromium
  # ss: the HA test waits for a client's connection to a paused controller; ip, nsenter
  # and unshare: the cluster of hosts in network namespaces (scripts/netns-cluster.sh)
  iproute2 util-linux
  # the style checks of the files a change touches (scripts/lint-changed.sh)
  clang-format clang-tidy
  # packaging: man pages from the programs' --help, the units checked by systemd-analyze
  help2man systemd
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
  else
    echo "install-deps: not root and no sudo; run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${#missing[@]} packages"
