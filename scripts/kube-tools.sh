#!/usr/bin/env bash
# Builds the Kubernetes test tools into $CUMULUS_KUBE_TOOLS (default
# ~/.cache/cumulus/kube-tools): kubetest, a real kube-apiserver with embedded
# etcd, kube-scheduler and kube-controller-manager in one binary (test/kube).
# Fake nodes are played by the tests themselves (test/kubelab). The first
# build takes several minutes on 2 cores; later runs reuse the binary while
# test/kube is unchanged. It is built without optimizations or debug
# information: a test tool compiles faster that way and runs fast enough.
#
# One build at a time: the script holds an exclusive lock on build.lock in
# that folder while it runs, and test/kubelab waits on that lock before it
# starts a lab, so scripts/test.sh can run this in the background from its
# start. The build's output is in build.log there.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
dir="${CUMULUS_KUBE_TOOLS:-$HOME/.cache/cumulus/kube-tools}"
mkdir -p "$dir"
exec 9>"$dir/build.lock"
flock 9

stamp=$( (cat test/kube/go.mod test/kube/go.sum test/kube/kubetest/*.go; grep -- '-gcflags' "$0") | sha256sum | cut -c1-16)
if [ ! -x "$dir/kubetest" ] || [ "$(cat "$dir/kubetest.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "building kubetest (kube-apiserver, scheduler, controller-manager) into $dir" >&2
  start=$(date +%s)
  build() {
  (cd test/kube && go build -trimpath -gcflags=all='-N -l -dwarf=false' -ldflags='-s -w' -o "$dir/kubetest.new" ./kubetest)
  }
  if ! build >"$dir/build.log" 2>&1; then
    cat "$dir/build.log" >&2
    echo "building kubetest failed (log: $dir/build.log)" >&2
    exit 1
  fi
  mv "$dir/kubetest.new" "$dir/kubetest"
  echo "$stamp" >"$dir/kubetest.stamp"
  echo "kubetest built in $(( $(date +%s) - start )) s" | tee -a "$dir/build.log" >&2
fi
