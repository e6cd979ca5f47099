# Sourced by the hack/build-*.sh scripts that build pinned Go binaries from
# the Go module proxy.

# go_build <module dir> <dir> <ldflags> <package>[=<name>]...: static
# binaries into dir, each named after its package (or <name>), from one go
# build in the module, so that each link overlaps the others' compiling;
# each is moved into place when whole. Built as kubefair's tests are
# (CGO_ENABLED=0, no -trimpath), so the packages both use at the same
# version compile once into the Go build cache.
go_build() {
  local mod=$1 dir=$2 ld=$3 spec pkgs=()
  shift 3
  for spec in "$@"; do pkgs+=("${spec%%=*}"); done
  rm -rf "$dir/.building"; mkdir -p "$dir/.building"
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -ldflags "$ld" -o "$dir/.building/" "${pkgs[@]}")
  for spec in "$@"; do
    local p=${spec%%=*} name=${spec#*=}
    [ "$name" != "$spec" ] || name=${p##*/}
    mv "$dir/.building/${p##*/}" "$dir/$name"
  done
  rmdir "$dir/.building"
}
