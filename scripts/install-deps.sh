#!/usr/bin/env bash
# Installs the system packages Haul needs (Debian/Ubuntu): SQLite headers for GRDB, and with
# --with-test-servers nginx for the end-to-end tests. Does nothing for what is already there.
set -euo pipefail

packages=()
dpkg -s libsqlite3-dev >/dev/null 2>&1 || packages+=(libsqlite3-dev)
if [[ "${1:-}" == "--with-test-servers" ]]; then
    command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || packages+=(nginx)
fi
[[ ${#packages[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "installing: ${packages[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
