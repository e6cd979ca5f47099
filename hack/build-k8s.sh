#!/usr/bin/env bash
# Builds pinned etcd, Kubernetes and helm binaries from the Go module proxy
# into a cache outside the repository, once. Used by envtest (etcd,
# kube-apiserver), by the local cluster (all of them) and by the chart's
# tests and the verify target (helm). Prints the bin directory.
#
#   hack/build-k8s.sh etcd kube-apiserver [kube-controller-manager kube-scheduler kubelet kubectl helm]
#
# Kubernetes and helm are built in one module whose dependencies are
# kubefair's own versions wherever both use a module (their code is as
# released; a library both use is at the newer of the two versions, most
# often kubefair's), and the way kubefair's tests are built (CGO_ENABLED=0,
# no -trimpath): so each library they share with kubefair — the Kubernetes
# API types, client-go, gRPC, protobuf, x/net... — is compiled once, from
# empty caches, for the tests, the images and these binaries alike (about
# 6 CPU-minutes less). etcd has a module of its own: k8s.io/kubernetes
# requires etcd's server module at v3.7.0, which in one module would
# replace the pinned server.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
HELM_VERSION=${HELM_VERSION:-v3.22.1}
CACHE=${KUBEFAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubefair}
BIN="$CACHE/k8s-$K8S_VERSION/bin"
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$BIN"
exec 9>"$BIN/.lock"
flock 9

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver)

log() { echo "build-k8s: $*" >&2; }
# shellcheck source=hack/go-build.sh
. "$(dirname "$0")/go-build.sh"

# file <binary>: its name in $BIN; pkg <binary>: its main package.
file() { case $1 in helm) echo "helm-$HELM_VERSION" ;; *) echo "$1" ;; esac; }
pkg() {
  case $1 in
    helm) echo helm.sh/helm/v3/cmd/helm ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
    *) log "unknown binary $1"; exit 2 ;;
  esac
}

build_etcd() {
  local mod="$CACHE/src/etcd-$ETCD_VERSION"
  mkdir -p "$mod"
  (cd "$mod"
   [ -f go.mod ] || { go mod init kubefair.local/etcd >/dev/null 2>&1; go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"; }
   CGO_ENABLED=0 GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

missing=() pkgs=()
for b in "${want[@]}"; do
  [ -x "$BIN/$(file "$b")" ] && continue
  if [ "$b" = etcd ]; then log "building etcd $ETCD_VERSION"; build_etcd; continue; fi
  missing+=("$b") pkgs+=("$(pkg "$b")")
done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi

# The module, made anew from kubefair's go.mod each time something is built.
mod="$CACHE/src/k8s-tools"
rm -rf "$mod"; mkdir -p "$mod"
kubefair_modules=$(cd "$root" && go list -m -f '{{if not .Main}}{{.Path}}@{{.Version}}{{end}}' all)
(cd "$mod"
 go mod init kubefair.local/k8s-tools >/dev/null 2>&1
 args=(-require="k8s.io/kubernetes@$K8S_VERSION" -require="helm.sh/helm/v3@$HELM_VERSION")
 # k8s.io/kubernetes replaces its staging modules with local paths; a
 # consumer must pin each of them to the matching published version.
 kgomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
 for m in $(grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$kgomod" | awk '{print $1}' | sort -u); do
   args+=(-replace="$m=$m@v0.${K8S_VERSION#v1.}")
 done
 for m in $kubefair_modules; do args+=(-require="$m"); done
 go mod edit "${args[@]}"
 { echo '//go:build tools'; echo 'package tools'; echo 'import ('
   for p in "${pkgs[@]}"; do echo "  _ \"$p\""; done
   echo ')'; } > tools.go
 GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
log "building ${missing[*]} (minutes when cold)"
specs=()
for i in "${!missing[@]}"; do specs+=("${pkgs[$i]}=$(file "${missing[$i]}")"); done
go_build "$mod" "$BIN" "$ld" "${specs[@]}"
echo "$BIN"
