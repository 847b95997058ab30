#!/usr/bin/env bash
# Installs what the calling command needs from Debian packages:
#
#   scripts/setup.sh          what `hetplan` builds with (scripts/main.sh, scripts/build.sh --main)
#   scripts/setup.sh --tests  that and what only the tests need (scripts/test.sh)
#
# Idempotent: does nothing when all are present. Needs root (or sudo) only when something is
# missing. On a fresh Debian 12 with g++ and cmake the build set is 10 packages, 30 with what they
# depend on (docs/benchmarks.md, "The main job, fresh clones, and hostile inputs", has its time).
set -euo pipefail

# The libraries hetplan links or includes (cmake/Dependencies.cmake). Boost.Graph's max-flow is
# header-only: libboost-dev (the headers), not libboost-graph-dev (which adds the compiled graph,
# regex, serialization and test libraries). CBC's pkg-config file links -lz, which none of its
# packages depends on: zlib1g-dev (the test set's packages brought it before).
packages=(
  cmake ninja-build g++ pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libboost-dev
  coinor-libcbc-dev coinor-libclp-dev zlib1g-dev
)
test_packages=(
  libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin  # the two-process collective test (tests/collective_mpi_test.cpp)
  python3 python3-yaml        # tests/python (registered with ctest); YAML: scripts/fuzz_inputs.py
  chromium chromium-driver    # the report's browser test (tests/report_browser_test.cpp)
  dpkg-dev                    # dpkg-shlibdeps, for the Debian package's test (tests/install_test.cpp)
  # The reference harness's CPU tests (tests/python, ReferenceHarness.*) train with torch:
  # Debian 12's python3-torch (1.13.1; its tensor- and pipeline-parallel tests skip there, needing
  # torch >= 2.2 and 2.4). About 70 s to install on the dev VM.
  python3-torch
)
if [ "${1:-}" = "--tests" ]; then
  packages+=("${test_packages[@]}")
elif [ $# -gt 0 ]; then
  echo "usage: scripts/setup.sh [--tests]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} dependencies present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
# --force-unsafe-io: dpkg without an fsync per file, which took most of the time (the build set on
# the dev VM: 78.7 s with, 28.3 s without; a power cut mid-install could leave a file half written,
# which reinstalling the package repairs).
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "${missing[@]}"
