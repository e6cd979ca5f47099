#!/usr/bin/env bash
# Builds the kubefair kernel (Linux 6.12 + kernel/series) and the same kernel
# unpatched, both from Debian's pinned linux-source-6.12 tarball, into a cache
# outside the repository. A tree is rebuilt only when the series, the patches
# or the config fragments changed. Prints nothing but progress on stderr.
# Both have the container host of config/node.config: the stock one also
# boots the cgroup v2 Kubernetes node (hack/build-node-image.sh).
#
#   kernel/build.sh            # both kernels
#   kernel/build.sh stock      # only the unpatched one
#   kernel/build.sh --package  # the pinned Debian package, for hack/deps.sh
#   KUBEFAIR_CACHE=... kernel/build.sh
set -euo pipefail

# Pins: Debian's package version and the tarball's checksum.
DEB_VERSION=6.12.117-1~deb12u1
TARBALL=/usr/src/linux-source-6.12.tar.xz
SHA256=585a4a074597aefa2b1a68ada83a3184ba351c127544dea80618bbcceaa3961f
if [ "${1:-}" = --package ]; then echo "linux-source-6.12=$DEB_VERSION"; exit 0; fi

here=$(cd "$(dirname "$0")" && pwd)
cache=${KUBEFAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubefair}/kernel
jobs=${JOBS:-$(nproc)}
log() { echo "kernel: $*" >&2; }

have=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true)
if [ "$have" != "$DEB_VERSION" ]; then
  log "linux-source-6.12 is '$have', the pinned version is $DEB_VERSION (apt-get install linux-source-6.12=$DEB_VERSION, or update the pins in kernel/build.sh)"
  exit 1
fi
echo "$SHA256  $TARBALL" | sha256sum -c --quiet - || { log "$TARBALL does not match the pinned checksum"; exit 1; }

# Each tree is unpacked from the tarball afresh whenever it is rebuilt:
# cheaper than importing the tarball into git once and checking it out
# twice, which cost about a CPU-minute of a cold build. (An earlier layout
# kept that git tree here; it is removed.)
rm -rf "$cache/linux-6.12-src"

stamp_of() { # what a tree's build depends on
  cat "$here/config/"*.config
  if [ "$1" = patched ]; then cat "$here/series"; while read -r p; do [ -n "$p" ] && cat "$here/patches/$p"; done < "$here/series"; fi
}

build() { # build <name>
  local name=$1 tree=$cache/$1 stamp
  stamp=$(stamp_of "$name" | sha256sum | cut -d' ' -f1)
  if [ -f "$tree/arch/x86/boot/bzImage" ] && [ "$(cat "$tree/.kubefair-stamp" 2>/dev/null)" = "$stamp" ]; then
    log "$name kernel is up to date"
    return
  fi
  log "unpacking the $name tree"
  rm -rf "$tree" "$tree.unpack"
  mkdir -p "$tree.unpack"
  tar -xf "$TARBALL" -C "$tree.unpack" --strip-components=1
  mv "$tree.unpack" "$tree"
  (cd "$tree"
   if [ "$name" = patched ]; then
     while read -r p; do
       [ -n "$p" ] || continue
       # No fuzz (-F0): a patch that does not apply exactly is an error.
       patch -s -p1 -F0 --forward --no-backup-if-mismatch --reject-file=- -i "$here/patches/$p" ||
         { log "$p does not apply to Linux $DEB_VERSION with no fuzz"; exit 1; }
     done < "$here/series"
   fi
   make -s tinyconfig >/dev/null
   frags=("$here/config/kubefair.config" "$here/config/node.config")
   [ "$name" = patched ] && frags+=("$here/config/patched.config")
   scripts/kconfig/merge_config.sh -m -O . .config "${frags[@]}" >/dev/null
   make -s olddefconfig
   # Kconfig drops a symbol silently when a dependency is missing (the
   # agent's CONFIG_SECCOMP_FILTER without CONFIG_NET, say): every value the
   # fragments set must be in the final .config.
   local sym val
   while IFS='=' read -r sym val; do
     if [ "$val" = n ]; then
       ! grep -q "^$sym=" .config || { log "$sym is on, the fragments turn it off"; exit 1; }
     elif ! grep -qx "$sym=$val" .config; then
       log "$sym=$val did not survive olddefconfig"; exit 1
     fi
   done < <(grep -hE '^CONFIG_[A-Za-z0-9_]+=' "${frags[@]}")
   log "building the $name bzImage (a few minutes when cold)"
   make -s -j"$jobs" bzImage >/dev/null
   echo "$stamp" > .kubefair-stamp)
  log "$name: $tree/arch/x86/boot/bzImage"
}

kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(patched stock)
for name in "${kernels[@]}"; do
  case $name in
    patched|stock) ;;
    *) log "unknown kernel '$name': patched or stock"; exit 2 ;;
  esac
done
for name in "${kernels[@]}"; do build "$name"; done
