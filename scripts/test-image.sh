#!/usr/bin/env bash
# Build the Docker image and check it for real: start a Docker daemon if none answers, make
# a Debian bookworm base image with debootstrap + `docker import` (for machines without
# Docker Hub), build the Dockerfile on it, run the container with a synthetic fixture
# repository mounted, let it ingest on first start, and fetch pages until they answer; then
# run compose.yaml (PostgreSQL, ingest, web) with the same image and check its pages.
#
#   scripts/test-image.sh            # as root; needs docker.io, docker-compose, debootstrap
#
# Environment: WORK (scratch directory, default /tmp/flagatlas-image), PORT (default 18080),
# MIRROR (Debian mirror for debootstrap, default deb.debian.org), KEEP=1 keeps the container.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-/tmp/flagatlas-image}
PORT=${PORT:-18080}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
BASE=flagatlas-base:bookworm
IMAGE=flagatlas:test
NAME=flagatlas-test-$$
mkdir -p "$WORK"
step() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

# A daemon of our own unless one already answers: no bridge or iptables (none here), vfs
# storage (no overlay inside a container).
export DOCKER_HOST=${DOCKER_HOST:-unix://$WORK/docker.sock}
docker=(/usr/bin/docker)  # Debian's client, the daemon's own version
[ -x "${docker[0]}" ] || docker=(docker)
started_daemon=""
if ! "${docker[@]}" info >/dev/null 2>&1; then
  step "starting dockerd"
  dockerd --iptables=false --bridge=none --storage-driver=vfs \
    --data-root "$WORK/docker" --exec-root "$WORK/exec" --pidfile "$WORK/dockerd.pid" \
    -H "$DOCKER_HOST" >"$WORK/dockerd.log" 2>&1 &
  started_daemon=$!
  for _ in $(seq 60); do "${docker[@]}" info >/dev/null 2>&1 && break; sleep 1; done
  "${docker[@]}" info >/dev/null
fi
cleanup() {
  [ -n "${KEEP:-}" ] || "${docker[@]}" rm -f "$NAME" >/dev/null 2>&1 || true
  if [ -n "$started_daemon" ]; then kill "$started_daemon" 2>/dev/null || true; wait "$started_daemon" 2>/dev/null || true; fi
}
trap cleanup EXIT

if ! "${docker[@]}" image inspect "$BASE" >/dev/null 2>&1; then
  step "base image: debootstrap bookworm"
  rootfs="$WORK/rootfs"
  [ -x "$rootfs/usr/bin/apt-get" ] ||
    debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log"
  # This machine's trust store (it may hold a local CA the registries are reached through).
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | "${docker[@]}" import - "$BASE" >/dev/null
fi

step "docker build"
DOCKER_BUILDKIT=0 "${docker[@]}" build -q --network host --build-arg BASE="$BASE" -t "$IMAGE" . >/dev/null
"${docker[@]}" image ls "$IMAGE" --format 'image {{.Repository}}:{{.Tag}} {{.Size}}'
"${docker[@]}" run --rm --entrypoint sh "$IMAGE" -c \
  'echo "runs as $(id -un) (uid $(id -u))"; for t in node npm gcc pytest; do command -v $t >/dev/null && echo "unexpected in the runtime image: $t"; done; true'

step "fixture repository"
repo="$WORK/fixture-repo"
rm -rf "$repo"
py=.venv/bin/python; [ -x "$py" ] || py=python3
"$py" -c "
import sys; from pathlib import Path
sys.path.insert(0, 'tests')
from fixture_repos import build_three_era_repo
build_three_era_repo(Path(sys.argv[1]))" "$WORK/fixture"
rm -rf "$repo" && mv "$WORK/fixture/sglang" "$repo" && rm -rf "$WORK/fixture"
chmod -R a+rX "$repo"

step "docker run: the image's own command (ingests on first start, then serves)"
"${docker[@]}" run -d --name "$NAME" --network host \
  -v "$repo:/sglang:ro" -e SGLANG_REPO=/sglang -e PORT="$PORT" "$IMAGE" >/dev/null
base="http://127.0.0.1:$PORT"
for _ in $(seq 120); do curl -fsS "$base/api/versions" >/dev/null 2>&1 && break; sleep 1; done

step "pages"
fail=0
check() {  # URL EXPECTED-STATUS NEEDLE
  local out status
  out=$(curl -sS -o "$WORK/body" -w '%{http_code} %{size_download}' "$base$1")
  status=${out%% *}
  if [ "$status" = "$2" ] && grep -q -e "$3" "$WORK/body"; then
    echo "ok   $1 -> $out"
  else
    echo "FAIL $1 -> $out (wanted $2 with '$3')"
    fail=1
  fi
}
check /api/versions 200 '"v0.3.0"'
check / 200 'Flag Atlas'
check /v/v0.3.0/flags 200 '--moe-runner-backend'
check /v/v0.3.0/flags/--moe-runner-backend 200 'moe'
check /api/v/v0.3.0/constraints 200 '"constraints"'
check /v/v0.3.0/source/python/sglang/srt/server_args.py 200 '<li id=L1'
check '/api/search?q=moe' 200 'moe'
check /static/vendor/htmx.min.js 200 'htmx'
check /v/v9.9.9/flags 404 'v0.3.0'
etag=$(curl -sSI "$base/v/v0.3.0/flags/--moe-runner-backend" | tr -d '\r' | awk -F': ' 'tolower($1)=="etag"{print $2}')
revalidated=$(curl -sS -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$base/v/v0.3.0/flags/--moe-runner-backend")
if [ "$revalidated" = 304 ]; then echo "ok   If-None-Match $etag -> 304"; else echo "FAIL If-None-Match -> $revalidated"; fail=1; fi
for _ in $(seq 60); do
  health=$("${docker[@]}" inspect -f '{{.State.Health.Status}}' "$NAME")
  [ "$health" = starting ] || break
  sleep 2
done
echo "health check: $health"
[ "$health" = healthy ] || fail=1
"${docker[@]}" top "$NAME" | sed 's/^/  /'
[ "$fail" = 0 ] || { "${docker[@]}" logs "$NAME" 2>&1 | tail -30; exit 1; }
"${docker[@]}" rm -f "$NAME" >/dev/null
step "image OK"

# compose.yaml as a team runs it: PostgreSQL, the one-shot ingest, then the web service once
# the ingest has completed. Docker Hub's postgres image is out of reach here, so a stand-in
# built from Debian's PostgreSQL takes its place (POSTGRES_IMAGE); the images are the ones
# built above (--no-build); the override mounts the fixture repository for the ingest.
step "compose: build the PostgreSQL stand-in"
PGIMAGE=flagatlas-postgres:test
DOCKER_BUILDKIT=0 "${docker[@]}" build -q --network host --build-arg BASE="$BASE" \
  -t "$PGIMAGE" scripts/postgres-image >/dev/null
printf 'services:\n  ingest:\n    image: %s\n    volumes: ["%s:/sglang:ro"]\n  web:\n    image: %s\n' \
  "$IMAGE" "$repo" "$IMAGE" >"$WORK/compose.test.yaml"
PROJECT=flagatlas-test-$$
compose=(docker-compose -p "$PROJECT" -f compose.yaml -f "$WORK/compose.test.yaml")
export POSTGRES_IMAGE=$PGIMAGE SGLANG_REPO=/sglang FLAGATLAS_PORT=$((PORT + 1))
compose_down() { "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true; cleanup; }
trap compose_down EXIT
step "compose up (db healthy -> ingest completes -> web)"
"${compose[@]}" up -d --no-build 2>&1 | sed 's/^/  /'
base="http://127.0.0.1:$FLAGATLAS_PORT"
for _ in $(seq 180); do curl -fsS "$base/api/versions" >/dev/null 2>&1 && break; sleep 1; done
"${compose[@]}" ps | sed 's/^/  /'
step "compose: pages from PostgreSQL"
check /api/versions 200 '"v0.3.0"'
check /v/v0.3.0/flags/--moe-runner-backend 200 'moe'
check '/api/search?q=moe' 200 'moe'
check /v/v0.3.0/source/python/sglang/srt/server_args.py 200 '<li id=L1'
ingest_exit=$("${docker[@]}" inspect -f '{{.State.ExitCode}}' "$("${compose[@]}" ps -q ingest)")
echo "ingest service exit code: $ingest_exit"
[ "$ingest_exit" = 0 ] || fail=1
versions=$("${compose[@]}" exec -T db psql -U flagatlas -d flagatlas -tAc 'select count(*) from version')
echo "versions in PostgreSQL: $versions"
[ "$versions" -gt 0 ] || fail=1
[ "$fail" = 0 ] || { "${compose[@]}" logs --tail 30 2>&1; exit 1; }
step "compose OK"
