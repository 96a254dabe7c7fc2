#!/usr/bin/env bash
# The whole test suite, as CI runs it: vet, every test, the race detector
# on the packages with concurrency, and the studio in a real browser.
# It first installs what the tests need (scripts/test-setup.sh; skip with
# CUMULUS_TEST_SETUP=0).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
phase() { echo "== $1 (at ${SECONDS}s)"; }
phase setup
if [ "${CUMULUS_TEST_SETUP:-1}" != 0 ]; then
  bash scripts/test-setup.sh
fi
phase "gofmt and vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# One static cumulus for every test package that runs it as a server, an
# agent or inside a node image (internal/testbin); built here, once.
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
CGO_ENABLED=0 go build -trimpath -o "$bindir/cumulus" ./cmd/cumulus
export CUMULUS_TEST_BINARY="$bindir/cumulus"
# test-setup.sh installs PostgreSQL; a missing one fails the store tests
# (internal/pgtest) instead of skipping them.
export CUMULUS_REQUIRE_POSTGRES=1
phase tests
go test -count=1 -timeout 20m ./...
phase "race detector"
go test -count=1 -race -timeout 20m ./internal/controller/ ./internal/dispatch/ ./internal/hub/ ./internal/decide/ ./internal/agent/ ./internal/lifecycle/ ./internal/server/ ./internal/ui/ ./internal/store/ ./internal/metrics/ ./internal/provider/kubernetes/ ./internal/provider/slurm/ ./internal/replica/ ./internal/daemon/ ./internal/batch/
phase "store on PostgreSQL"
# The store's tests again on PostgreSQL, writers really side by side, under
# the race detector: the same behaviour on both engines.
CUMULUS_TEST_STORE=postgres go test -count=1 -race -timeout 10m ./internal/store/
phase studio
# The web studio end to end in Chromium.
bash test/ui/run.sh
phase done
