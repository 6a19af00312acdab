#!/usr/bin/env bash
# Podman for the container tests, on a Debian bookworm machine with no registry and no Docker daemon.
# Idempotent: every step is skipped when its result is already there. Run as root.
#
#   bash .ci/setup-podman.sh            # install + configure + make the base image
#   . "${ACCELBENCH_PODMAN_STATE:-/var/tmp/accelbench-podman}/env.sh"   # CONTAINERS_CONF for podman
#
# It makes:
#   $STATE/containers.conf   podman settings this kind of machine needs (see below)
#   $STATE/env.sh            exports CONTAINERS_CONF (tests/test_podman.py reads it too)
#   localhost/accelbench-ci-base:bookworm
#                            Debian bookworm (minbase, debootstrap) + python3 (3.11) + venv + ca-certificates,
#                            trusting this machine's CAs; the BASE_IMAGE the CPU image is built on in CI.
set -euo pipefail

STATE=${ACCELBENCH_PODMAN_STATE:-/var/tmp/accelbench-podman}
BASE_TAG=${ACCELBENCH_CI_BASE_IMAGE:-localhost/accelbench-ci-base:bookworm}
SUITE=bookworm
PACKAGES=(podman runc uidmap fuse-overlayfs slirp4netns debootstrap catatonit)
say() { printf '[setup-podman %(%H:%M:%S)T] %s\n' -1 "$*"; }

mkdir -p "$STATE"

# 1. packages -------------------------------------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if ((${#missing[@]})); then
    [ "$(id -u)" = 0 ] || { echo "setup-podman: must run as root to install: ${missing[*]}" >&2; exit 1; }
    say "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
say "$(podman --version), $(runc --version | head -1)"

# 2. containers.conf ------------------------------------------------------------------------------
# - default_ulimits: podman raises RLIMIT_NOFILE above the hard limit otherwise, and without
#   CAP_SYS_RESOURCE that fails ("setrlimit RLIMIT_NOFILE: Operation not permitted");
# - runc + cgroupfs: crun refuses cgroups in hybrid mode, and there is no systemd to manage cgroups;
# - events_logger=file: no journald.
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
conf="$STATE/containers.conf"
cat > "$conf.tmp" <<CONF
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=32768:32768"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
CONF
mv "$conf.tmp" "$conf"
printf 'export CONTAINERS_CONF=%q\n' "$conf" > "$STATE/env.sh"
export CONTAINERS_CONF="$conf"

# 3. the base image, without a registry ---------------------------------------------------------
if podman image exists "$BASE_TAG"; then
    say "$BASE_TAG already present"
else
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    rootfs="$STATE/rootfs-$SUITE"
    rm -rf "$rootfs"
    say "debootstrap $SUITE from $mirror"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$mirror" > "$STATE/debootstrap.log" 2>&1 \
        || { tail -20 "$STATE/debootstrap.log" >&2; exit 1; }
    # trust this machine's CAs (a TLS-intercepting proxy), so pip inside builds reaches the index
    if compgen -G '/usr/local/share/ca-certificates/*.crt' > /dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    fi
    chroot "$rootfs" update-ca-certificates > /dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    say "podman import -> $BASE_TAG"
    tar -C "$rootfs" -c . | podman import --quiet \
        --change 'CMD ["/bin/bash"]' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
        - "$BASE_TAG" > /dev/null
    rm -rf "$rootfs"
fi
podman run --rm "$BASE_TAG" python3 -c 'import sys, venv; print("base python", sys.version.split()[0])'
say "done; CONTAINERS_CONF=$conf"
