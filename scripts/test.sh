#!/usr/bin/env bash
# The whole test suite, as CI runs it: vet, every test, and the race
# detector on the packages with concurrency.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -count=1 -timeout 20m ./...
go test -count=1 -race -timeout 20m ./internal/controller/ ./internal/hub/ ./internal/decide/ ./internal/agent/ ./internal/lifecycle/ ./internal/server/ ./internal/ui/
# The web studio end to end in Chromium (needs .ci/run's chromium and npm ci).
bash test/ui/run.sh
