#!/bin/sh
# Build a Python 3.11 base image from Debian's packages, for hosts that reach Debian's archive but
# no container registry (the Containerfile's default base, python:3.11-slim-bookworm, is pulled
# from one). Then build Engram on it:
#   sudo deploy/base-image.sh localhost/python-local:3.11-bookworm
#   podman build --format docker --build-arg PYTHON=localhost/python-local:3.11-bookworm \
#       -f deploy/Containerfile -t localhost/engram:latest .
# The host's CA bundle is copied in (and named to pip), so a build behind a TLS-inspecting proxy
# the host trusts reaches the package index. Needs root, debootstrap and podman.
set -eu
TAG="${1:-localhost/python-local:3.11-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ROOT="$(mktemp -d /var/tmp/engram-rootfs.XXXXXX)"
trap 'rm -rf "$ROOT"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$ROOT" "$MIRROR"
ln -sf /usr/bin/python3 "$ROOT/usr/local/bin/python"
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
tar -C "$ROOT" -c . | podman import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["python3"]' - "$TAG"
