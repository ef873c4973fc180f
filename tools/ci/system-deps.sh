#!/usr/bin/env bash
# Install the Debian packages the test suite needs (Debian 12, run as root). Idempotent and quiet:
# does nothing when everything is already installed.
#   chromium    headless browser that loads brax-io's HTML viewer (WebGL through SwiftShader)
#   libosmesa6  Mesa's off-screen OpenGL (libOSMesa), the CPU backend of brax-io's image/video renderer
#   git         `bench:ab --values @REV` reads a module's source at a git revision (and its test does)
set -euo pipefail

PACKAGES=(chromium libosmesa6 git)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: need root to install: ${missing[*]} (run: sudo $0)" >&2
  exit 1
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
