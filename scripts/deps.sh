#!/usr/bin/env bash
# Installs the Debian packages evald needs to build, test and run, when missing.
# Used by `make run`, `make test` (with EVALD_DEPS_TEST_EXTRAS=1, so that every suite runs)
# and CI. Quiet when everything is present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git curl jq ca-certificates
  libmicrohttpd-dev libjansson-dev libpq-dev libcurl4-openssl-dev libssl-dev
  libpcre2-dev libunistring-dev libcsv-dev libyaml-dev libjemalloc-dev check libsubunit-dev
  protobuf-c-compiler libprotobuf-c-dev
  postgresql
  clang ninja-build
)
# The container test (scripts/ci/container.sh): podman builds and runs the image on a base
# made with debootstrap; Debian's docker-compose drives podman's socket.
if [ "${EVALD_DEPS_CONTAINER:-0}" = 1 ]; then
  packages+=(podman buildah runc debootstrap docker-compose golang-github-containernetworking-plugin-dnsname uidmap slirp4netns fuse-overlayfs)
fi
# Extra packages for the Node-driven suites (SDK clients, browser, OpenAPI lint), the
# benchmark smoke test (python3, wrk), SciPy for the statistics check (tests/stats),
# xmllint and script(1) for evald-cli's JUnit and terminal checks, and the fuzz targets
# (libFuzzer and the sanitizer runtimes for clang: make fuzz, make fuzz-smoke).
if [ "${EVALD_DEPS_TEST_EXTRAS:-0}" = 1 ]; then
  packages+=(nodejs npm chromium wrk python3 python3-scipy libxml2-utils bsdutils libfuzzer-14-dev libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    # nodejs may come from another repository under the same name; npm may be bundled.
    if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
    if [ "$p" = nodejs ] && command -v node >/dev/null 2>&1; then continue; fi
    if [ "$p" = python3 ] && command -v python3 >/dev/null 2>&1; then continue; fi
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "deps: missing packages (${missing[*]}) and not root; install them and retry" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
