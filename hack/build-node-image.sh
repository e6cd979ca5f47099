#!/usr/bin/env bash
# Builds the disk image of kubefair's cgroup v2 node, a QEMU guest with
# systemd as PID 1 that joins the local cluster (test/harness/cluster,
# AddGuestNode): Debian bookworm (debootstrap minbase) with systemd, udev,
# dbus, sshd and systemd-networkd; containerd 2, runc and the CNI plugins
# from hack/build-runtime.sh; kubelet from hack/build-k8s.sh; the files of
# hack/node-image; the agent's Localhost seccomp profile
# (config/seccomp/kubefair-agent.json) in kubelet's seccomp directory, for
# the chart's patched-kernel shape; an ssh key pair for root. The result is
# a raw ext4 image made with `mkfs.ext4 -d` (no loop mounts), booted with
# either kernel of kernel/build.sh.
#
# Cached below $KUBEFAIR_CACHE/node-image under a hash of every input (this
# script, hack/node-image, the package list, the mirror and the runtime and
# kubelet binaries, the seccomp profile), rebuilt only when one changes. The Debian base is
# cached on its own, so changing a unit file or a binary does not run
# debootstrap again. Needs root. Prints the directory holding disk.img and
# the key pair (id_ed25519, id_ed25519.pub).
#
#   hack/build-node-image.sh
#   DEBIAN_MIRROR=http://... hack/build-node-image.sh   # default: the host's apt sources
set -euo pipefail

SUITE=bookworm
# udev: systemd's device units and networkd wait for it.
PACKAGES=(systemd systemd-sysv udev dbus iproute2 openssh-server libseccomp2 ca-certificates procps)
# Room left on the root file system for images, containers and logs.
FREE_MIB=1536
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE=${KUBEFAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubefair}
here=$(cd "$(dirname "$0")" && pwd)
files=$here/node-image
out=$CACHE/node-image
profile=$here/../config/seccomp/kubefair-agent.json

log() { echo "node-image: $*" >&2; }

[ "$(id -u)" -eq 0 ] || { log "needs root (debootstrap, device nodes, file owners)"; exit 1; }
for tool in debootstrap mkfs.ext4 ssh-keygen chroot; do
  command -v "$tool" >/dev/null || { log "$tool is missing (make deps installs it)"; exit 1; }
done

# host_mirror: the Debian mirror of the host's apt sources that serves
# $SUITE, one-line (sources.list) or deb822 (*.sources) format.
host_mirror() {
  {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] || continue
      awk -v suite="$SUITE" '$1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) print $i
      }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v suite="$SUITE" 'BEGIN { RS = ""; FS = "\n" } {
        deb = 0; uri = ""; suites = ""
        for (j = 1; j <= NF; j++) {
          if ($j ~ /^Types:/ && (" " $j " ") ~ /[ \t]deb[ \t]/) deb = 1
          if ($j ~ /^URIs:/) { split($j, w, /[ \t]+/); uri = w[2] }
          if ($j ~ /^Suites:/) suites = $j " "
        }
        if (deb && uri != "" && suites ~ (" " suite " ")) print uri
      }' "$f"
    done
  } | head -n 1
}

mirror=${DEBIAN_MIRROR:-$(host_mirror)}
[ -n "$mirror" ] || { log "no Debian $SUITE mirror in the host's apt sources; set DEBIAN_MIRROR"; exit 1; }

runtime=$("$here/build-runtime.sh")
kubelet=$(K8S_VERSION=$K8S_VERSION "$here/build-k8s.sh" kubelet)/kubelet
binaries=("$runtime"/bin/{containerd,containerd-shim-runc-v2,ctr,runc} "$runtime"/cni/{bridge,host-local,loopback} "$kubelet")

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

# make_base <dir>: the Debian root file system, before anything of ours.
make_base() {
  local includes
  includes=$(IFS=,; echo "${PACKAGES[*]}")
  debootstrap --variant=minbase --include="$includes" "$SUITE" "$1" "$mirror" >&2
  # Downloaded packages and indexes, documentation, translations and
  # udev's hardware database (nothing here needs it): not in the image.
  rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* \
    "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/usr/share/locale/* \
    "$1"/usr/lib/udev/hwdb.d "$1"/usr/lib/udev/hwdb.bin "$1"/etc/udev/hwdb.bin
}

base_key=$({ echo "$SUITE $mirror"; declare -f make_base; printf '%s\n' "${PACKAGES[@]}"; debootstrap --version; } | sha256sum | cut -c1-16)
image_key=$({
  echo "$base_key $FREE_MIB"
  cat "$0"
  (cd "$files" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
  sha256sum "${binaries[@]}" "$profile" | cut -d' ' -f1
} | sha256sum | cut -c1-16)
image=$out/$image_key
if [ -f "$image/disk.img" ]; then
  echo "$image"
  exit 0
fi

base=$out/base-$base_key
work=$out/$image_key.tmp
cleanup() {
  # debootstrap mounts /proc and /sys in its target; leave nothing mounted.
  for m in $(awk -v d="$out/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$work" "$base.tmp"
}
trap cleanup EXIT

if [ ! -d "$base" ]; then
  log "debootstrap $SUITE from $mirror (a few minutes when cold)"
  rm -rf "$base.tmp"
  make_base "$base.tmp"
  mv "$base.tmp" "$base"
fi

log "installing kubelet, containerd, runc, the CNI plugins and the node's files"
rm -rf "$work"
mkdir -p "$work"
root=$work/rootfs
cp -a "$base" "$root"
install -m 0755 "$runtime"/bin/{containerd,containerd-shim-runc-v2,ctr,runc} "$kubelet" "$root/usr/local/bin/"
install -d "$root/opt/cni/bin" "$root/etc/cni/net.d" "$root/etc/containerd" "$root/etc/kubernetes/pki" "$root/var/lib/kubelet"
install -m 0755 "$runtime"/cni/{bridge,host-local,loopback} "$root/opt/cni/bin/"
cp -r --no-preserve=ownership "$files/." "$root/"
install -D -m 0644 "$profile" "$root/var/lib/kubelet/seccomp/kubefair-agent.json"
# Units: networkd and sshd at boot; containerd and kubelet are started by
# the harness. Periodic maintenance would only take CPU from the tests.
chroot "$root" systemctl enable -q systemd-networkd.service ssh.service
chroot "$root" systemctl mask -q apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
  e2scrub_all.timer fstrim.timer systemd-networkd-wait-online.service
# A machine id of its own (an empty one would make every boot a first boot).
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$root/etc/machine-id"
echo >> "$root/etc/machine-id"

ssh-keygen -q -t ed25519 -N '' -C kubefair-node -f "$work/id_ed25519"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"

size=$(( $(du -sm "$root" | cut -f1) + FREE_MIB ))
log "making the ext4 image (${size} MiB, sparse)"
# Its notes go to stderr: stdout is the image's directory alone.
mkfs.ext4 -q -F -m 0 -L kubefair-node -d "$root" "$work/disk.img" "${size}M" >&2
rm -rf "$root"
{
  echo "suite=$SUITE mirror=$mirror packages=${PACKAGES[*]}"
  echo "kubernetes=$K8S_VERSION runtime=$(basename "$runtime")"
} > "$work/inputs"
mv "$work" "$image"
# Older images and bases are stale now (a guest still running from one keeps
# its open file).
for old in "$out"/*; do
  [ "$old" = "$image" ] || [ "$old" = "$base" ] || rm -rf "$old"
done
log "built $image"
echo "$image"
