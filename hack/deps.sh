#!/usr/bin/env bash
# Installs the Debian packages kubefair's tests and demo need, only those that
# are missing, so a fresh machine needs nothing but `make test` / `make demo`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# containerd, runc and the CNI plugins are not Debian's: hack/build-runtime.sh
# (`make runtime`) builds current ones from the Go module proxy.
packages=(
  # the local cluster's node address (ip), the end-to-end suite's host check (iptables-save)
  iproute2 iptables
  # building runc (cgo; libseccomp found through pkg-config) and the cgroup
  # v2 node's Debian image
  libseccomp-dev pkg-config debootstrap e2fsprogs openssh-client
  # tracing the agent's system calls (its seccomp allow-list)
  strace
  # kernel build and QEMU guests; the kernel source at the version
  # kernel/build.sh pins (the patches apply to it with no fuzz), which
  # Debian's security archive keeps after newer point releases
  "$("$root/kernel/build.sh" --package)" xz-utils patch qemu-system-x86 busybox-static flex bison bc libelf-dev libssl-dev cpio gcc make
  # certificates for the local cluster
  openssl
  # the latency benchmark's server and load generator (Debian's, nobody's here)
  nginx-light wrk
)

# A package named as name=version is missing unless that version is the
# one installed.
missing=()
for p in "${packages[@]}"; do
  name=${p%%=*} want=${p#*=}
  have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
  case $have in
    "install ok installed "*) [ "$name" = "$p" ] || [ "${have##* }" = "$want" ] || missing+=("$p") ;;
    *) missing+=("$p") ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# No service a package ships may start (nginx would listen on port 80): the
# tests start what they need themselves, on loopback.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends --allow-downgrades "${missing[@]}" >/dev/null
