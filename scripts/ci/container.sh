#!/usr/bin/env bash
# The container deployment, end to end, with podman and no registry:
#   1. a Debian 12 base image made with debootstrap (minbase) and `podman import`, cached
#      as var/container/bookworm-minbase.tar (a rerun skips debootstrap);
#   2. the evald image built from docker/Dockerfile on it, and a local stand-in for
#      postgres:15-bookworm (scripts/ci/container/postgres.Containerfile);
#   3. `evald --help` and `--version` in the image with its own environment;
#   4. docker/docker-compose.yml's demo profile started with Debian's docker-compose against
#      podman's API socket, the README's evaluation run through it (POST, wait, GET);
#   5. `compose stop` (SIGTERM): evald must exit 0; `down` and `up` again: the evaluation and
#      its report are still there (volume pgdata);
#   6. the compose file refuses an API token shorter than evald accepts, before evald starts;
#   7. everything it made is removed at the end (containers, network, volume; the images are
#      kept for the next run unless EVALD_CONTAINER_KEEP_IMAGES=0).
# Run as root (podman, debootstrap). Uses docker/.env; a docker/.env of the user's is put
# back as it was. The API is published on 127.0.0.1:${EVALD_CONTAINER_PORT:-18080}.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
t_start=$(date +%s)

project=evald-ci
port=${EVALD_CONTAINER_PORT:-18080}
cache=$root/var/container
base_tar=$cache/bookworm-minbase.tar
sock=$cache/podman.sock
mirror=${EVALD_DEBIAN_MIRROR:-}
log() { echo "container: $*"; }
fail() { echo "container: FAILED: $*" >&2; exit 1; }

for tool in podman docker-compose debootstrap curl jq; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed (EVALD_DEPS_CONTAINER=1 scripts/deps.sh installs it)"
done
[ "$(id -u)" = 0 ] || fail "run as root (podman and debootstrap need it here)"
mkdir -p "$cache"

# The Debian mirror this machine uses (for debootstrap), from apt's own sources.
if [ -z "$mirror" ]; then
  mirror=$(sed -nE 's/^URIs: *(\S+debian)\/?$/\1/p; s/^deb +(\[[^]]*\] +)?(\S+debian)\/? +bookworm .*/\2/p' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

# Podman settings for this script only (CONTAINERS_CONF replaces the system's files): runc,
# since crun refuses a host with cgroups in hybrid mode, and limits below the host's hard
# limits, which a process without CAP_SYS_RESOURCE cannot set again.
export CONTAINERS_CONF=$cache/containers.conf
nofile=$(( $(ulimit -Hn) < 16384 ? $(ulimit -Hn) / 2 : 16384 ))
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF

# ------------------------------------------------------------------ cleanup on any exit
env_file=$root/docker/.env
env_backup=""
service_pid=""
ticker_pid=""
compose_up=0
compose() {
  DOCKER_HOST=unix://$sock COMPOSE_PROJECT_NAME=$project EVALD_PUBLISH=127.0.0.1:$port \
    docker-compose -f docker/docker-compose.yml "$@"
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ "$compose_up" = 1 ]; then
    if [ "$status" -ne 0 ]; then
      echo "container: logs of the failed run:" >&2
      compose --profile demo logs --no-color --tail=40 >&2 2>/dev/null || true
    fi
    compose --profile demo down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  if [ -n "$ticker_pid" ]; then kill "$ticker_pid" 2>/dev/null || true; wait "$ticker_pid" 2>/dev/null || true; fi
  if [ -n "$service_pid" ]; then kill "$service_pid" 2>/dev/null || true; wait "$service_pid" 2>/dev/null || true; fi
  rm -f "$sock"
  if [ -n "$env_backup" ]; then mv -f "$env_backup" "$env_file"; else rm -f "$env_file"; fi
  if [ "${EVALD_CONTAINER_KEEP_IMAGES:-1}" = 0 ]; then
    podman rmi -f localhost/evald:local docker.io/library/evald:local \
      docker.io/library/postgres:15-bookworm docker.io/library/debian:12-slim >/dev/null 2>&1 || true
  fi
  log "$([ "$status" = 0 ] && echo passed || echo failed) in $(( $(date +%s) - t_start )) s"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -f "$env_file" ]; then env_backup=$cache/env.user-backup; cp -p "$env_file" "$env_backup"; fi

# ------------------------------------------------------------------------ 1. base image
# Tagged as the name the Dockerfile asks for, so that the build uses it and never pulls.
if ! podman image exists docker.io/library/debian:12-slim; then
  if [ ! -s "$base_tar" ]; then
    log "debootstrap bookworm (minbase) from $mirror"
    rm -rf "$cache/rootfs"
    debootstrap --variant=minbase bookworm "$cache/rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
      { tail -n 20 "$cache/debootstrap.log" >&2; fail "debootstrap"; }
    # The suites a debian:12-slim image has, and no package cache.
    cat >"$cache/rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
EOF
    rm -rf "$cache/rootfs/var/cache/apt/archives/"*.deb "$cache/rootfs/var/lib/apt/lists/"*
    tar -C "$cache/rootfs" --numeric-owner -cf "$base_tar.part" . && mv "$base_tar.part" "$base_tar"
    rm -rf "$cache/rootfs"
  fi
  log "importing the base image"
  podman import --change 'CMD ["/bin/bash"]' "$base_tar" docker.io/library/debian:12-slim >/dev/null
fi

# ------------------------------------------------------------------------- 2. images
log "building evald:local (docker/Dockerfile)"
podman build --pull=never -q -f docker/Dockerfile --ignorefile docker/Dockerfile.dockerignore \
  -t localhost/evald:local . >"$cache/build.log" 2>&1 || { tail -n 30 "$cache/build.log" >&2; fail "podman build of docker/Dockerfile"; }
# compose asks the API for "evald:local", which podman's Docker API reads as docker.io's.
podman tag localhost/evald:local docker.io/library/evald:local
log "building the postgres:15-bookworm stand-in"
podman build --pull=never -q -f scripts/ci/container/postgres.Containerfile \
  -t docker.io/library/postgres:15-bookworm scripts/ci/container >"$cache/build-postgres.log" 2>&1 ||
  { tail -n 30 "$cache/build-postgres.log" >&2; fail "podman build of the postgres stand-in"; }
size=$(podman image inspect localhost/evald:local --format '{{.Size}}')
log "evald image: $(( size / 1000000 )) MB"

# ------------------------------------------------------------ 3. --help, --version
help_out=$(podman run --rm localhost/evald:local --help) || fail "evald --help exits $? in the image"
grep -q "EVALD_LISTEN" <<<"$help_out" || fail "evald --help in the image does not list EVALD_LISTEN"
version=$(podman run --rm localhost/evald:local --version) || fail "evald --version exits $? in the image"
[[ "$version" == "evald "* ]] || fail "evald --version printed '$version'"
log "$version: --help and --version exit 0 in the image"

# ---------------------------------------------------------------- 4. compose, demo
rm -f "$sock"
podman system service --time=0 "unix://$sock" >"$cache/podman-service.log" 2>&1 &
service_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || fail "podman system service did not open $sock"
# Podman schedules HEALTHCHECKs with systemd timers; without systemd (as in a CI container)
# nothing runs them and compose would wait for service_healthy forever. Run them here.
(
  while sleep 2; do
    for c in $(podman ps --filter "label=com.docker.compose.project=$project" --format '{{.ID}}'); do
      podman healthcheck run "$c" >/dev/null 2>&1 || true
    done
  done
) &
ticker_pid=$!

token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
password=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
# docker/.env.example with the blanks filled in, as a user would.
sed -e "s/^EVALD_API_TOKEN=.*/EVALD_API_TOKEN=$token/" \
    -e "s/change-this-database-password/$password/g" docker/.env.example >"$env_file"
auth=(-H "Authorization: Bearer $token")
api=http://127.0.0.1:$port

wait_ready() {
  for _ in $(seq 120); do
    curl -fsS -o /dev/null "$api/readyz" 2>/dev/null && return 0
    sleep 0.5
  done
  fail "evald did not answer /readyz on $api within 60 s"
}

log "compose --profile demo up"
compose_up=1
compose --profile demo up -d --no-build >"$cache/compose-up.log" 2>&1 || { cat "$cache/compose-up.log" >&2; fail "compose up"; }
wait_ready
available=$(curl -fsS "${auth[@]}" "$api/v1/models" | jq '[.models[] | select(.available and .provider == "openai")] | length')
[ "$available" -ge 1 ] || fail "no openai model is available under the demo profile"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$api/v1/models")" = 401 ] || fail "/v1/models answered without the token"

# The README's evaluation ("Start an evaluation"), then its report.
eval_id=$(curl -fsS "${auth[@]}" -X POST "$api/v1/evaluations" -H 'Content-Type: application/json' -d '{
    "dimension": "prompt",
    "model": {"model": "stub-model", "provider": "openai"},
    "control":   {"label": "reply",  "prompt": "Reply with exactly OK."},
    "treatment": {"label": "return", "prompt": "Return exactly the text OK."},
    "evaluator": {"function_id": "eval::assert::normalized_text", "arguments": {"expected": "OK"}},
    "runs": 3
  }' | jq -r .evaluation_id)
[[ "$eval_id" == eval_* ]] || fail "POST /v1/evaluations gave no evaluation id"
# What the README shows of the report.
summary='{status, eligible: .report.eligible, pass_rate: [.report.control_aggregate.pass_rate, .report.treatment_aggregate.pass_rate], delta_pass_rate: .report.delta.pass_rate, runs: (.report.effective_execution_order | length)}'
status=""
for _ in $(seq 240); do
  status=$(curl -fsS "${auth[@]}" "$api/v1/evaluations/$eval_id/status" | jq -r .status)
  case "$status" in completed | failed | cancelled) break ;; esac
  sleep 0.5
done
[ "$status" = completed ] || fail "evaluation $eval_id ended as '$status'"
report=$(curl -fsS "${auth[@]}" "$api/v1/evaluations/$eval_id" | jq -c "$summary")
# The README: the stub answers the second wording with a near miss, so B fails every run.
[ "$report" = '{"status":"completed","eligible":false,"pass_rate":[1,0],"delta_pass_rate":-1,"runs":6}' ] ||
  fail "the report differs from the README's: $report"
log "evaluation $eval_id completed: $report"

# ------------------------------------------------------- 5. SIGTERM, down and up again
compose --profile demo stop >/dev/null 2>&1 || fail "compose stop"
evald_ctr=$(podman ps -a --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=evald" --format '{{.ID}}' | head -n 1)
code=$(podman inspect "$evald_ctr" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || fail "evald exited $code on compose stop (SIGTERM); 0 expected"
podman logs "$evald_ctr" 2>&1 | grep -q '"msg":"stopped"\|stopping\|shut' || log "note: no stop line in evald's log"
log "compose stop: evald exited 0 on SIGTERM"
compose --profile demo down >/dev/null 2>&1 || fail "compose down"
compose --profile demo up -d --no-build >"$cache/compose-up.log" 2>&1 || { cat "$cache/compose-up.log" >&2; fail "compose up (second)"; }
wait_ready
again=$(curl -fsS "${auth[@]}" "$api/v1/evaluations/$eval_id" | jq -c "$summary")
[ "$again" = "$report" ] || fail "after down/up the evaluation reads $again, before $report"
log "after down and up, $eval_id is unchanged (volume pgdata)"

# ---------------------------------------- 6. what evald would refuse, before it starts
# config-check refuses; compose reports it exited 2, its log says why; evald never ran.
refused() { # refused WHAT EXPECTED-LOG-TEXT [ENV=VALUE...]: compose up must fail before evald starts
  local what=$1 text=$2; shift 2
  compose --profile demo down >/dev/null 2>&1 || fail "compose down"
  if env "$@" DOCKER_HOST="unix://$sock" COMPOSE_PROJECT_NAME="$project" EVALD_PUBLISH="127.0.0.1:$port" \
      docker-compose -f docker/docker-compose.yml up -d --no-build >"$cache/compose-refused.log" 2>&1; then
    fail "compose up started with $what"
  fi
  compose logs --no-color config-check >>"$cache/compose-refused.log" 2>&1 || true
  grep -q "$text" "$cache/compose-refused.log" || { cat "$cache/compose-refused.log" >&2; fail "the refusal of $what does not say why"; }
  [ -z "$(podman ps -a --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=evald" --format '{{.ID}}')" ] ||
    fail "evald was started with $what"
  log "refused before evald started: $what"
}
sed -i "s/^EVALD_API_TOKEN=.*/EVALD_API_TOKEN=short-token/" "$env_file"
refused "an 11-character token" "EVALD_API_TOKEN must be at least 16 characters"
sed -i "s/^EVALD_API_TOKEN=.*/EVALD_API_TOKEN=$token/" "$env_file"
# .env.example's URLs at evald-stub, with the demo profile off (COMPOSE_PROFILES empty).
refused "provider URLs at evald-stub without the demo profile" "which runs only with the demo profile" COMPOSE_PROFILES=
