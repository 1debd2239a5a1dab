#!/usr/bin/env bash
# Configures and builds every build type with every compiler, each in its own folder
# build-matrix/<cc>-<type>, with the project's -Wall -Wextra -Werror. Stops at the first
# failure and names the compiler and the type. A rerun only rebuilds what changed.
#   usage: scripts/ci/build-matrix.sh            every compiler and type
#          BUILD_MATRIX_CC="clang" BUILD_MATRIX_TYPES="Release" scripts/ci/build-matrix.sh
# Ninja is used when installed (less overhead per file than make); JOBS defaults to nproc.
set -euo pipefail
cd "$(dirname "$0")/../.."

read -r -a compilers <<<"${BUILD_MATRIX_CC:-gcc clang}"
read -r -a types <<<"${BUILD_MATRIX_TYPES:-Debug Release RelWithDebInfo MinSizeRel}"
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

for cc in "${compilers[@]}"; do
  command -v "$cc" >/dev/null 2>&1 || { echo "build-matrix: compiler $cc is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
done

mkdir -p build-matrix
start=$(date +%s)
for cc in "${compilers[@]}"; do
  for type in "${types[@]}"; do
    dir=build-matrix/$cc-$type
    t0=$(date +%s)
    # A folder configured with another generator cannot be reused: start it again.
    if [ -f "$dir/CMakeCache.txt" ] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}$" "$dir/CMakeCache.txt"; then
      rm -rf "$dir"
    fi
    if ! cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$type" >"$dir.configure.log" 2>&1; then
      cat "$dir.configure.log" >&2
      echo "build-matrix: FAILED to configure with $cc in $type (log: $dir.configure.log)" >&2
      exit 1
    fi
    if ! cmake --build "$dir" -j "$jobs"; then
      echo "build-matrix: FAILED to build with $cc in $type ($dir)" >&2
      exit 1
    fi
    echo "build-matrix: $cc $type ok ($(( $(date +%s) - t0 )) s)"
  done
done
echo "build-matrix: ${#compilers[@]} compilers x ${#types[@]} types built in $(( $(date +%s) - start )) s"
