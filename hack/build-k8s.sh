#!/usr/bin/env bash
# Builds pinned etcd and Kubernetes binaries from the Go module proxy into a
# cache outside the repository, once. Used by envtest (etcd, kube-apiserver)
# and by the local cluster (all of them). Prints the bin directory.
#
#   hack/build-k8s.sh etcd kube-apiserver [kube-controller-manager kube-scheduler kubelet kubectl]
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE=${KUBEFAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubefair}
BIN="$CACHE/k8s-$K8S_VERSION/bin"
mkdir -p "$BIN"

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver)

log() { echo "build-k8s: $*" >&2; }

build_etcd() {
  local mod="$CACHE/src/etcd-$ETCD_VERSION"
  mkdir -p "$mod"
  (cd "$mod"
   [ -f go.mod ] || { go mod init kubefair.local/etcd >/dev/null 2>&1; go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"; }
   GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_kube() {
  local mod="$CACHE/src/kubernetes-$K8S_VERSION" minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local staging=v0.${K8S_VERSION#v1.}
  mkdir -p "$mod"
  (cd "$mod"
   if [ ! -f go.mod ]; then
     go mod init kubefair.local/kubernetes >/dev/null 2>&1
     go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
     # k8s.io/kubernetes replaces its staging modules with local paths; a
     # consumer must pin each of them to the matching published version.
     local kgomod
     kgomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
     grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$kgomod" | awk '{print $1}' | sort -u | while read -r m; do
       go mod edit -replace="$m=$m@$staging"
     done
     {
       echo '//go:build tools'
       echo 'package tools'
       echo 'import ('
       for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do echo "  _ \"k8s.io/kubernetes/cmd/$c\""; done
       echo ')'
     } > tools.go
     GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
   fi
   local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
   # One go build for all of them: each binary's link (one CPU, tens of
   # seconds) overlaps the others' compiling.
   local out="$BIN/.building" pkgs=()
   for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
   log "building $* $K8S_VERSION (minutes when cold)"
   rm -rf "$out"; mkdir -p "$out"
   CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}"
   for c in "$@"; do mv "$out/$c" "$BIN/$c"; done
   rmdir "$out")
}

kube=()
for b in "${want[@]}"; do
  [ -x "$BIN/$b" ] && continue
  case $b in
    etcd) log "building etcd $ETCD_VERSION"; build_etcd ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl) kube+=("$b") ;;
    *) echo "build-k8s: unknown binary $b" >&2; exit 2 ;;
  esac
done
[ ${#kube[@]} -eq 0 ] || build_kube "${kube[@]}"
echo "$BIN"
