#!/usr/bin/env bash
# The web studio's end-to-end suite: builds cumulus (unless
# CUMULUS_TEST_BINARY names one), then runs the
# Playwright tests with node's test runner in Debian's Chromium. Each test
# run starts its own `cumulus serve` on a free loopback port with a
# temporary data directory. Screenshots land in test-output/ui/.
#   CUMULUS_UI_DOC_SHOTS=1 bash test/ui/run.sh   also refreshes docs/img/studio-*.png
set -euo pipefail
cd "$(dirname "$0")"
chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  echo "test/ui needs Chromium at $chromium: apt-get install chromium (.ci/run does)" >&2
  exit 1
fi
if [ ! -d node_modules/playwright-core ]; then
  echo "test/ui needs playwright-core: run 'npm ci' in test/ui (.ci/run does)" >&2
  exit 1
fi
bin="${CUMULUS_TEST_BINARY:-}" # scripts/test.sh built it already
if [ -z "$bin" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd ../.. && CGO_ENABLED=0 go build -trimpath -o "$tmp/cumulus" ./cmd/cumulus)
  bin="$tmp/cumulus"
fi
CUMULUS_BIN="$bin" node --test studio.test.mjs
