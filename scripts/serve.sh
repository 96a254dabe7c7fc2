#!/usr/bin/env bash
# Build cumulus into ./bin and run the control plane with its defaults:
# http://127.0.0.1:8787, state in ~/.cumulus (override with CUMULUS_DATA_DIR).
# Extra arguments go to `cumulus serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "serve.sh: $*" >&2; }
if [ ! -x bin/cumulus ]; then
  say "first build of cumulus: Go downloads the modules it needs (about 150 MB, once, into $(go env GOMODCACHE))"
  say "and compiles them with Cumulus (about 800 packages: the Kubernetes client, the Azure SDK and the pure-Go SQLite"
  say "are most of it). On a laptop this takes 3 to 10 minutes, mostly silent; later builds take seconds."
fi
started=$SECONDS
say "[1/2] fetching the Go modules that are missing (go: downloading … lines; none when all are here)"
go mod download
say "[2/2] compiling bin/cumulus (static: it also goes into Docker node images)"
CGO_ENABLED=0 go build -o bin/cumulus ./cmd/cumulus
say "built $(pwd)/bin/cumulus in $((SECONDS - started)) s — put it on your PATH: export PATH=\"$(pwd)/bin:\$PATH\""
exec bin/cumulus serve "$@"
