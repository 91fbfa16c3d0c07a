# SPDX-License-Identifier: Apache-2.0
# The two commands of the quickstart, and the steps under them.
#   make build   install missing packages, configure and build (RelWithDebInfo)
#   make test    build the default and sanitizer presets, run their tests, lint the last commit
#   make demo    build, start a local 16-node cluster, run a multi-node job, show it
#   make bench   build the benchmarks too, run them, Cohort side by side with Slurm (docs/performance.md)
#   make bench-peers  install the peer scheduler the benchmarks compare with (Slurm 22.05)
#   make bench-scale  16,384 emulated nodes, 100,000 jobs (several minutes; not in make test)
#   make lint    clang-format and clang-tidy on the C++ files of the last commit
#   make clean   remove the build trees

.PHONY: all deps build build-asan build-bench test test-default test-asan demo bench bench-peers bench-scale clean lint

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	cmake --preset default
	cmake --build --preset default

build-asan: deps
	cmake --preset asan
	cmake --build --preset asan

test-default: build
	ctest --preset default

test-asan: build-asan
	ctest --preset asan

test: test-default test-asan lint

# clang-format and clang-tidy on the C++ files of the last commit (docs/style.md).
lint: build
	bash scripts/lint-changed.sh

demo: build
	bash scripts/demo.sh

# The default preset leaves the benchmarks' programs out (make test needs
# none of them); the benchmarks' targets configure it with them.
build-bench: deps
	cmake --preset default -DCOHORT_BUILD_BENCH=ON
	cmake --build --preset default

bench: build-bench bench-peers
	bash bench/run.sh

bench-peers:
	@bash bench/peers/slurm/install.sh

bench-scale: build-bench
	bash bench/scale/run.sh build/default

clean:
	rm -rf build
