#!/usr/bin/env bash
# Build and run the Odradek container image with podman (or docker where a
# docker engine answers), also on a machine that reaches no container registry.
#
#   scripts/container.sh engine          print the engine to use; install podman if none (root, Debian)
#   scripts/container.sh base            print the base image to build on: python:3.11-slim if it is
#                                        there or can be pulled, else a local Debian image made once
#                                        with debootstrap from the mirror in apt's sources (cached)
#   scripts/container.sh build [TAG]     build the image from ./Dockerfile (default tag odradek:dev)
#   scripts/container.sh run [ARGS...]   run it: data in volume odradek-data, port 127.0.0.1:9092
#                                        (advertised as localhost:PORT); ARGS go to `odradek serve`
#
# Environment: ODRADEK_ENGINE (podman|docker) forces the engine, ODRADEK_BASE_IMAGE forces the base
# image, ODRADEK_IMAGE names the image for `run`, ODRADEK_PORT the host port for `run`,
# ODRADEK_CONTROL_PORT a host port for the test control endpoint (off unless set; capture on),
# ODRADEK_REGISTRY_PORT the host port of the schema registry (default 8081),
# ODRADEK_CONSOLE_PORT the host port of the web console (default 8080),
# ODRADEK_VOLUME the data volume (default odradek-data), ODRADEK_NAME the container's name.
# Exit status 3 means "no engine and none can be installed here" (not root, or no apt-get).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEFAULT_BASE="python:3.11-slim"
LOCAL_BASE="localhost/odradek-base:bookworm"
SUITE="bookworm"
STATE_LOCK="/tmp/odradek-container.lock"   # serialises installs and base-image builds

say() { echo "container.sh: $*" >&2; }
die() { say "$1"; exit "${2:-1}"; }

# One holder at a time for apt-get and debootstrap (tests and CI may call us concurrently).
with_lock() { exec 9>"$STATE_LOCK"; flock 9; "$@"; flock -u 9; }

docker_engine_answers() {
    # /usr/local/bin/docker may be a bare client with no daemon behind it: ask the daemon.
    command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1
}

can_install() {
    [ "$(id -u)" -eq 0 ] || die "no container engine; install podman (or docker), or run as root so this script can" 3
    command -v apt-get >/dev/null || die "no container engine and no apt-get to install podman with; install podman or docker" 3
}

install_podman() {
    command -v podman >/dev/null && return 0
    say "installing podman (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        podman buildah runc uidmap slirp4netns fuse-overlayfs containernetworking-plugins \
        golang-github-containernetworking-plugin-dnsname iptables debootstrap ca-certificates \
        podman-compose >/dev/null
}

# Settings some hosts need (harmless elsewhere): podman's default nofile limit above the hard
# limit this process may set makes every container fail with "setrlimit RLIMIT_NOFILE", and crun
# refuses mixed cgroup v1/v2 hosts where runc works. Only set what containers.conf leaves unset.
configure_podman() {
    [ "$(id -u)" -eq 0 ] || return 0
    local conf=/etc/containers/containers.conf hard
    mkdir -p /etc/containers
    touch "$conf"
    hard="$(ulimit -Hn)"
    if ! grep -q '^[[:space:]]*default_ulimits' "$conf" && [ "$hard" != unlimited ] && [ "$hard" -lt 1048576 ]; then
        say "containers.conf: default_ulimits nofile=$hard:$hard (the host's hard limit)"
        add_setting "$conf" containers "default_ulimits = [\"nofile=$hard:$hard\", \"nproc=32768:32768\"]"
    fi
    if ! grep -q '^[[:space:]]*runtime[[:space:]]*=' "$conf" && command -v runc >/dev/null; then
        say "containers.conf: runtime = runc"
        add_setting "$conf" engine 'runtime = "runc"'
    fi
}

add_setting() {  # add_setting FILE TABLE LINE: put LINE under [TABLE], creating the table if needed
    local file="$1" table="$2" line="$3"
    if grep -q "^\[$table\]" "$file"; then
        sed -i "/^\[$table\]/a $line" "$file"
    else
        printf '\n[%s]\n%s\n' "$table" "$line" >>"$file"
    fi
}

engine() {
    if [ -n "${ODRADEK_ENGINE:-}" ]; then echo "$ODRADEK_ENGINE"; return; fi
    if command -v podman >/dev/null; then with_lock configure_podman; echo podman; return; fi
    if docker_engine_answers; then echo docker; return; fi
    can_install
    with_lock install_podman
    with_lock configure_podman
    echo podman
}

apt_mirror() {
    # The machine's configured Debian mirror: first URI of a deb source (deb822 or one-line form).
    local uri
    uri="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v -- '-security' | head -1 || true)"
    [ -n "$uri" ] || uri="$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' | grep -v -- '-security' | head -1 || true)"
    [ -n "$uri" ] || die "no Debian mirror found in apt's sources"
    echo "$uri"
}

make_local_base() {
    local eng="$1" rootfs mirror
    "$eng" image inspect "$LOCAL_BASE" >/dev/null 2>&1 && return 0  # made once, then cached
    if ! command -v debootstrap >/dev/null; then can_install; apt-get update -qq; apt-get install -y -qq debootstrap >/dev/null; fi
    command -v debootstrap >/dev/null || die "debootstrap missing (apt-get install debootstrap)"
    mirror="$(apt_mirror)"
    rootfs="$(mktemp -d /var/tmp/odradek-rootfs.XXXXXX)"
    say "making $LOCAL_BASE with debootstrap ($SUITE from $mirror), once"
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates \
        "$SUITE" "$rootfs" "$mirror" >/dev/null
    # behave as the official image does: pip installs into the system Python
    rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
    # HTTPS may go through an intercepting proxy that the host trusts: trust it in this locally
    # made base too (never in the Dockerfile, which must build unchanged anywhere).
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null
        # pip in a venv would otherwise use its own CA bundle, which lacks them
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | "$eng" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$LOCAL_BASE" >/dev/null
    rm -rf "$rootfs"
}

base() {
    local eng="$1"
    if [ -n "${ODRADEK_BASE_IMAGE:-}" ]; then echo "$ODRADEK_BASE_IMAGE"; return; fi
    for name in "$DEFAULT_BASE" "docker.io/library/$DEFAULT_BASE"; do
        if "$eng" image inspect "$name" >/dev/null 2>&1; then echo "$name"; return; fi
    done
    if timeout 60 "$eng" pull -q "docker.io/library/$DEFAULT_BASE" >/dev/null 2>&1; then
        echo "docker.io/library/$DEFAULT_BASE"; return
    fi
    say "$DEFAULT_BASE cannot be pulled; using a local Debian $SUITE base"
    with_lock make_local_base "$eng"
    echo "$LOCAL_BASE"
}

build() {
    local tag="${1:-odradek:dev}" eng base_image format=()
    eng="$(engine)"
    base_image="$(base "$eng")"
    # podman's default OCI format drops HEALTHCHECK; the docker format keeps it
    [ "$eng" = podman ] && format=(--format docker)
    say "building $tag on $base_image with $eng"
    "$eng" build "${format[@]}" --build-arg "BASE_IMAGE=$base_image" -t "$tag" "$ROOT" >&2
    echo "$tag"
}

CONTROL_PORT_INSIDE=9644

run() {
    local eng tty=() port="${ODRADEK_PORT:-9092}" control=()
    eng="$(engine)"
    [ -t 0 ] && tty=(-it)
    # clients bootstrapped on the published port must be told that port (Metadata), not 9092
    local publish=(-p "127.0.0.1:$port:9092" -e "KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:$port"
                   -p "127.0.0.1:${ODRADEK_REGISTRY_PORT:-8081}:8081"  # the schema registry
                   -p "127.0.0.1:${ODRADEK_CONSOLE_PORT:-8080}:8080")  # the web console
    if [ -n "${ODRADEK_CONTROL_PORT:-}" ]; then
        # the test control endpoint: every interface inside the container (its loopback is unreachable
        # through -p), published on the host's loopback only; capture on, as in the test fixtures
        control=(-p "127.0.0.1:$ODRADEK_CONTROL_PORT:$CONTROL_PORT_INSIDE"
                 -e "KAFKA_ODRADEK_CONTROL_LISTENER=0.0.0.0:$CONTROL_PORT_INSIDE"
                 -e "KAFKA_ODRADEK_CONTROL_CAPTURE_REQUESTS=1000")
    fi
    local name=()
    [ -n "${ODRADEK_NAME:-}" ] && name=(--name "$ODRADEK_NAME")
    exec "$eng" run --rm "${tty[@]}" "${name[@]}" "${publish[@]}" "${control[@]}" \
        -v "${ODRADEK_VOLUME:-odradek-data}:/var/lib/odradek" "${ODRADEK_IMAGE:-odradek:dev}" "$@"
}

case "${1:-}" in
    engine) engine ;;
    base) base "$(engine)" ;;
    build) shift; build "$@" ;;
    run) shift; run "$@" ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
