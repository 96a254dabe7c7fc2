#!/usr/bin/env bash
# Builds the Kubernetes test tools into $CUMULUS_KUBE_TOOLS (default
# ~/.cache/cumulus/kube-tools): kubetest (a real kube-apiserver with embedded
# etcd, kube-scheduler and kube-controller-manager, from test/kube), kwok
# (fake nodes) and kwok's stage files. The first build takes ~6 minutes on 2
# cores; later runs reuse the binaries while test/kube is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
dir="${CUMULUS_KUBE_TOOLS:-$HOME/.cache/cumulus/kube-tools}"
kwok_version=v0.8.0
mkdir -p "$dir/stages"

stamp=$(cat test/kube/go.mod test/kube/go.sum test/kube/kubetest/*.go | sha256sum | cut -c1-16)
if [ ! -x "$dir/kubetest" ] || [ "$(cat "$dir/kubetest.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "building kubetest (kube-apiserver, scheduler, controller-manager) into $dir" >&2
  start=$(date +%s)
  (cd test/kube && go build -o "$dir/kubetest.new" ./kubetest)
  mv "$dir/kubetest.new" "$dir/kubetest"
  echo "$stamp" >"$dir/kubetest.stamp"
  echo "kubetest built in $(( $(date +%s) - start )) s" >&2
fi

if [ ! -x "$dir/kwok" ] || [ "$(cat "$dir/kwok.version" 2>/dev/null)" != "$kwok_version" ]; then
  echo "building kwok $kwok_version into $dir" >&2
  GOBIN="$dir" go install "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
  echo "$kwok_version" >"$dir/kwok.version"
fi

# kwok's stages: nodes turn Ready and keep a lease; pods turn Running. Pod
# deletion and completion are left to the tests' stand-in kubelet.
src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$kwok_version/kustomize/stage"
if [ ! -d "$src" ]; then
  (cd /tmp && go mod download "sigs.k8s.io/kwok@$kwok_version")
fi
cp "$src/node/fast/node-initialize.yaml" "$src/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
  "$src/pod/fast/pod-ready.yaml" "$dir/stages/"
chmod u+w "$dir/stages/"*.yaml
