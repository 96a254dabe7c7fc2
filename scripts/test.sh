#!/usr/bin/env bash
# The whole test suite, as CI runs it: gofmt and vet, every test, the race
# detector on the packages with concurrency, the store on PostgreSQL, and
# the studio in a real browser. It first installs what the tests need
# (scripts/test-setup.sh; skip with CUMULUS_TEST_SETUP=0).
#
# On a fresh machine the run is mostly compiling, on 2 cores, so the work
# is laid out to keep both busy and to compile nothing twice:
#   - setup (apt, npm, dockerd: mostly waiting on the network and the disk)
#     runs in the background while this shell compiles, and is waited for
#     before the first test;
#   - the Kubernetes test tools build in the background, at a lower
#     priority, from the start; only the tests that start a Kubernetes lab
#     wait for them (test/kubelab waits on the build's lock);
#   - everything but the race detector is built with cgo off, as the static
#     binary must be: vet, the binary and the tests share one build cache;
#   - the race detector's test binaries compile in the background, at a
#     lower priority, while the other tests run; the packages it covers
#     run under it only, not twice;
#   - test binaries are linked without DWARF (-ldflags=-w), which a test
#     run never reads and which is a third of a link, and go test's own
#     vet is off: go vet ./... has run every check it would.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export CGO_ENABLED=0
phase() { echo "== $1 (at ${SECONDS}s)"; }

# How test binaries are built: the same for the race detector's built
# ahead and run, so that the run finds them in the build cache.
testflags=(-ldflags=-w -vet=off)
# The packages with concurrency, whose tests run under the race detector.
race_pkgs=(./internal/controller/ ./internal/dispatch/ ./internal/hub/ ./internal/decide/ ./internal/agent/ ./internal/lifecycle/
  ./internal/server/ ./internal/ui/ ./internal/store/ ./internal/metrics/ ./internal/metrics/promtext/ ./internal/provider/kubernetes/ ./internal/provider/slurm/ ./internal/replica/
  ./internal/daemon/ ./internal/batch/ ./internal/deepcopy/ ./internal/provider/sim/)

work=$(mktemp -d)
setup="" kube="" racebuild=""
# background CMD… runs CMD in a process group (and session) of its own,
# whose id is then in $!: finish stops it whole, the go command's
# compilers with it.
background() { setsid "$@" & }
finish() {
  # Nothing started here outlives the run: a failed run stops the
  # background builds and waits for setup (stopping apt halfway would
  # leave dpkg to repair).
  [ -z "$racebuild" ] || kill -- -"$racebuild" 2>/dev/null || true
  [ -z "$kube" ] || kill -- -"$kube" 2>/dev/null || true
  [ -z "$setup" ] || wait "$setup" 2>/dev/null || true
  rm -rf "$work"
}
trap finish EXIT

phase setup
if [ "${CUMULUS_TEST_SETUP:-1}" != 0 ]; then
  bash scripts/test-setup.sh --no-kube-tools >"$work/setup.log" 2>&1 &
  setup=$!
  echo "installing what the tests need in the background (scripts/test-setup.sh)"
fi
background nice -n 10 bash scripts/kube-tools.sh >"$work/kube-tools.log" 2>&1
kube=$!
echo "building the Kubernetes test tools in the background (scripts/kube-tools.sh)"

phase "modules, gofmt, static build and vet"
go mod download
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# One static cumulus for every test package that runs it as a server, an
# agent or inside a node image (internal/testbin); built here, once. With
# cgo off, as everything below, it shares its packages with vet and the
# tests.
go build -o "$work/cumulus" ./cmd/cumulus
export CUMULUS_TEST_BINARY="$work/cumulus"
go vet ./...

if [ -n "$setup" ]; then
  phase "waiting for setup"
  status=0
  wait "$setup" || status=$?
  setup=""
  cat "$work/setup.log"
  if [ "$status" != 0 ]; then
    echo "scripts/test-setup.sh failed ($status)"; exit 1
  fi
fi
# test-setup.sh installs PostgreSQL; a missing one fails the store tests
# (internal/pgtest) instead of skipping them.
export CUMULUS_REQUIRE_POSTGRES=1

phase tests
# The race detector's test binaries, built and linked into the build cache
# but not run (-exec true).
background env CGO_ENABLED=1 nice -n 19 go test "${testflags[@]}" -race -count=1 -exec true "${race_pkgs[@]}" >"$work/race-build.log" 2>&1
racebuild=$!
others=$(go list ./... | grep -vxF -f <(go list "${race_pkgs[@]}"))
go test "${testflags[@]}" -count=1 -timeout 20m $others
status=0
wait "$kube" || status=$?
kube=""
cat "$work/kube-tools.log"
if [ "$status" != 0 ]; then
  echo "scripts/kube-tools.sh failed ($status)"; exit 1
fi

phase "race detector"
status=0
wait "$racebuild" || status=$?
racebuild=""
if [ "$status" != 0 ]; then
  cat "$work/race-build.log"; echo "compiling the race detector's tests failed ($status)"; exit 1
fi
CGO_ENABLED=1 go test "${testflags[@]}" -count=1 -race -timeout 20m "${race_pkgs[@]}"
phase "store on PostgreSQL"
# The store's tests again on PostgreSQL, writers really side by side, under
# the race detector: the same behaviour on both engines.
CUMULUS_TEST_STORE=postgres CGO_ENABLED=1 go test "${testflags[@]}" -count=1 -race -timeout 10m ./internal/store/
phase studio
# The web studio end to end in Chromium.
bash test/ui/run.sh
phase done
