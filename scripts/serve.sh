#!/usr/bin/env bash
# Build cumulus into ./bin and run the control plane with its defaults:
# http://127.0.0.1:8787, state in ~/.cumulus (override with CUMULUS_DATA_DIR).
# Extra arguments go to `cumulus serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -o bin/cumulus ./cmd/cumulus   # static: it also goes into Docker node images
echo "built $(pwd)/bin/cumulus — put it on your PATH: export PATH=\"$(pwd)/bin:\$PATH\"" >&2
exec bin/cumulus serve "$@"
