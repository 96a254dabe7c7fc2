#!/usr/bin/env bash
# Installs and starts what the whole test suite needs on a Debian machine:
# Docker (engine + CLI, started if not running), Debian's Chromium and
# playwright-core for the studio's browser tests, OpenSSH's client,
# busybox-static for the tiny test image, the frameworks real jobs use
# (python3-torch, openmpi-bin, python3-mpi4py; python3-pandas for parallel
# steps over tables), Debian's prometheus
# (promtool and the server) for the metrics tests, Debian's postgresql for the
# postgres store's tests (only its binaries: internal/pgtest runs a private
# server per test process; nothing here starts a system one), the official Azure
# clients test/sdk drives (Debian's python3-azure: azure-ai-ml and
# azure-mgmt-machinelearningservices; @azure/arm-machinelearning by npm ci in
# test/sdk/js), and the Kubernetes test tools
# (a kube-apiserver, scheduler and controller-manager built from source: scripts/kube-tools.sh). Idempotent; scripts/test.sh runs
# it first.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

need_pkgs=()
for p in git ca-certificates procps busybox-static iproute2 iptables util-linux; do # iproute2, iptables, nsenter: the local provider's network namespaces
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  need_pkgs+=(docker.io)
fi
dpkg -s chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
command -v npm >/dev/null 2>&1 || need_pkgs+=(nodejs npm)
command -v ssh >/dev/null 2>&1 || need_pkgs+=(openssh-client)
framework_pkgs=()
for p in python3-torch openmpi-bin python3-mpi4py python3-pandas; do
  dpkg -s "$p" >/dev/null 2>&1 || framework_pkgs+=("$p")
done
command -v promtool >/dev/null 2>&1 || framework_pkgs+=(prometheus) # promtool and a server for the metrics tests
dpkg -s postgresql >/dev/null 2>&1 || framework_pkgs+=(postgresql) # initdb and postgres for internal/pgtest
dpkg -s python3-azure >/dev/null 2>&1 || framework_pkgs+=(python3-azure) # test/sdk: azure-ai-ml, azure-mgmt-machinelearningservices
if [ ${#need_pkgs[@]} -gt 0 ] || [ ${#framework_pkgs[@]} -gt 0 ]; then
  $sudo apt-get update -qq
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing ${need_pkgs[*]}" >&2
  $sudo apt-get install -y -qq "${need_pkgs[@]}"
fi
if [ ${#framework_pkgs[@]} -gt 0 ]; then
  # Without recommends: CUDA, documentation and exporter extras are not needed.
  echo "installing ${framework_pkgs[*]}" >&2
  $sudo apt-get install -y -qq --no-install-recommends "${framework_pkgs[@]}"
fi
if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd" >&2
  $sudo sh -c 'nohup dockerd >/tmp/dockerd.log 2>&1 &'
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "dockerd did not start within 60 s:" >&2
    tail -n 30 /tmp/dockerd.log >&2 || true
    exit 1
  fi
fi
if [ ! -d test/ui/node_modules/playwright-core ]; then
  (cd test/ui && npm ci --no-audit --no-fund)
fi
if [ ! -d test/sdk/js/node_modules/@azure/arm-machinelearning ]; then
  (cd test/sdk/js && npm ci --no-audit --no-fund)
fi
bash scripts/kube-tools.sh
