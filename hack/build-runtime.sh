#!/usr/bin/env bash
# Builds the container runtime of kubefair's nodes from the Go module proxy
# into a cache outside the repository, once per version: containerd 2.x
# (containerd, containerd-shim-runc-v2, ctr), runc, and the CNI plugins the
# nodes use (bridge, host-local, loopback). Used by the local cluster's host
# node and baked into the cgroup v2 node's disk image. Prints the directory
# that holds bin/ (the runtime) and cni/ (the plugins).
#
#   hack/build-runtime.sh        # build what is missing, print the directory
#   hack/build-runtime.sh --dir  # print the directory only
set -euo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CNI_VERSION=${CNI_VERSION:-v1.10.0}
CACHE=${KUBEFAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubefair}
OUT="$CACHE/runtime-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_VERSION"
BIN="$OUT/bin"
CNI="$OUT/cni"
if [ "${1:-}" = --dir ]; then echo "$OUT"; exit 0; fi
mkdir -p "$BIN" "$CNI"
# One build at a time: suites and image builds may ask concurrently.
exec 9>"$BIN/.lock"
flock 9

log() { echo "build-runtime: $*" >&2; }
# shellcheck source=hack/go-build.sh
. "$(dirname "$0")/go-build.sh"

# module <dir> <module@version>: a throwaway module that requires one module.
module() {
  mkdir -p "$1"
  (cd "$1"
   [ -f go.mod ] || { go mod init kubefair.local/runtime >/dev/null 2>&1; go mod edit -require="$2"; })
}

if [ ! -x "$BIN/containerd" ] || [ ! -x "$BIN/containerd-shim-runc-v2" ] || [ ! -x "$BIN/ctr" ]; then
  log "building containerd $CONTAINERD_VERSION (a few minutes when cold)"
  mod="$CACHE/src/containerd-$CONTAINERD_VERSION"
  module "$mod" "github.com/containerd/containerd/v2@$CONTAINERD_VERSION"
  ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  # Without cgo: no btrfs snapshotter (it needs cgo), which kubefair's
  # nodes do not use (overlayfs).
  go_build "$mod" "$BIN" "$ld" github.com/containerd/containerd/v2/cmd/{containerd,containerd-shim-runc-v2,ctr}
fi

if [ ! -x "$BIN/runc" ]; then
  log "building runc $RUNC_VERSION"
  mod="$CACHE/src/runc-$RUNC_VERSION"
  module "$mod" "github.com/opencontainers/runc@$RUNC_VERSION"
  # runc needs cgo (its nsenter is C) and libseccomp (Debian's
  # libseccomp-dev); linked statically so that the same binary runs on the
  # host and in the node's Debian image.
  (cd "$mod" && CGO_ENABLED=1 GOFLAGS=-mod=mod go build -trimpath -tags "seccomp netgo osusergo urfave_cli_no_docs" \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v} -extldflags -static" -o "$BIN/runc.tmp" github.com/opencontainers/runc)
  mv "$BIN/runc.tmp" "$BIN/runc"
fi
plugins=()
for p in main/bridge ipam/host-local main/loopback; do
  [ -x "$CNI/${p#*/}" ] || plugins+=("github.com/containernetworking/plugins/plugins/$p")
done
if [ ${#plugins[@]} -gt 0 ]; then
  log "building the CNI plugins $CNI_VERSION"
  mod="$CACHE/src/cni-plugins-$CNI_VERSION"
  module "$mod" "github.com/containernetworking/plugins@$CNI_VERSION"
  go_build "$mod" "$CNI" "-s -w" "${plugins[@]}"
fi
echo "$OUT"
