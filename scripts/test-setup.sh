#!/usr/bin/env bash
# Installs and starts what the whole test suite needs on a Debian machine:
# Docker (engine + CLI, started if not running), Debian's Chromium and
# playwright-core for the studio's browser tests, OpenSSH's client,
# busybox-static for the tiny test image, gcc for the race detector, the
# frameworks real jobs use (python3-torch, openmpi-bin, python3-mpi4py;
# python3-pandas for parallel steps over tables),
# Debian's prometheus (promtool and the server) for the metrics tests,
# Debian's postgresql for the postgres store's tests (only its binaries:
# internal/pgtest runs a private server per test process; nothing here
# starts a system one), the official Azure clients test/sdk drives
# (Debian's python3-azure: azure-ai-ml and
# azure-mgmt-machinelearningservices; @azure/arm-machinelearning by npm ci
# in test/sdk/js), Debian's slurm-wlm and munge (only the binaries: each
# Slurm test runs a private munged, slurmctld and slurmd,
# internal/provider/slurm/slurmtest), and the Kubernetes test tools (a kube-apiserver,
# scheduler and controller-manager built from source:
# scripts/kube-tools.sh; not with --no-kube-tools, for a caller that builds
# them itself). Idempotent; scripts/test.sh runs it first.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
kube_tools=1
[ "${1:-}" = --no-kube-tools ] && kube_tools=0

# One apt-get install for everything, without recommends (they would add
# needrestart, node-tap and its tree, CUDA for torch, documentation): what
# a recommendation brings that the tests use is named here.
pkgs=()
for p in git ca-certificates procps busybox-static iproute2 iptables util-linux; do # iproute2, iptables, nsenter: the local provider's network namespaces
  dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
done
if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  pkgs+=(docker.io apparmor cgroupfs-mount xz-utils) # docker.io's recommendations that the engine uses
fi
dpkg -s chromium >/dev/null 2>&1 || pkgs+=(chromium)
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
command -v ssh >/dev/null 2>&1 || pkgs+=(openssh-client)
command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev) # cgo, which the race detector needs
for p in python3-torch openmpi-bin python3-mpi4py python3-pandas; do
  dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
done
command -v promtool >/dev/null 2>&1 || pkgs+=(prometheus) # promtool and a server for the metrics tests
dpkg -s postgresql >/dev/null 2>&1 || pkgs+=(postgresql) # initdb and postgres for internal/pgtest
dpkg -s python3-azure >/dev/null 2>&1 || pkgs+=(python3-azure) # test/sdk: azure-ai-ml, azure-mgmt-machinelearningservices
for p in slurm-wlm munge; do # the slurm provider's tests: each starts its own munged, slurmctld and slurmd (slurmtest); nothing here starts them
  dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing ${pkgs[*]}" >&2
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
fi

# Docker starts while npm fetches the studio's and the SDK test's modules.
docker_log=/tmp/dockerd.log
if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd" >&2
  $sudo sh -c "nohup dockerd >$docker_log 2>&1 &"
fi
npm_pids=()
if [ ! -d test/ui/node_modules/playwright-core ]; then
  (cd test/ui && npm ci --no-audit --no-fund) &
  npm_pids+=($!)
fi
if [ ! -d test/sdk/js/node_modules/@azure/arm-machinelearning ]; then
  (cd test/sdk/js && npm ci --no-audit --no-fund) &
  npm_pids+=($!)
fi
for p in "${npm_pids[@]}"; do
  wait "$p"
done
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && break
  sleep 1
done
if ! docker info >/dev/null 2>&1; then
  echo "dockerd did not start within 60 s:" >&2
  tail -n 30 "$docker_log" >&2 || true
  exit 1
fi
if [ "$kube_tools" = 1 ]; then
  bash scripts/kube-tools.sh
fi
