#!/usr/bin/env bash
# Installs what Haul needs (Debian/Ubuntu): SQLite headers for GRDB; with --with-test-servers also
# what the end-to-end tests talk to: nginx, tinyproxy (an HTTP proxy; the tinyproxy-bin package,
# which is the binary without a system service on port 8888), squid (a company's HTTP proxy, run
# with Debian's stock rules; its service is not started here), microsocks (a SOCKS5 proxy), openssl
# (test certificates), curl (the client of the servers' own tests), Chromium (the daemon's web
# page), apache2, lighttpd and caddy (whose directory listings `haul mirror` reads; their
# services are not used: tests start each with a config of their own), promtool (from the
# prometheus package: it checks the daemon's /metrics; the server is not used), PostgreSQL (the
# daemon's --store; tests make a cluster of their own with initdb, its service is not used), the aria2p
# client library from PyPI, and aiohttp-tus (a tus 1.0.0 server the upload tests start) with tuspy
# (tus's official Python client, to cross-check that server). Does nothing for what is already there.
set -euo pipefail

packages=()
dpkg -s libsqlite3-dev >/dev/null 2>&1 || packages+=(libsqlite3-dev)
if [[ "${1:-}" == "--with-test-servers" ]]; then
    command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || packages+=(nginx)
    command -v tinyproxy >/dev/null 2>&1 || [[ -x /usr/bin/tinyproxy ]] || packages+=(tinyproxy-bin)
    command -v microsocks >/dev/null 2>&1 || [[ -x /usr/bin/microsocks ]] || packages+=(microsocks)
    [[ -x /usr/sbin/squid ]] || command -v squid >/dev/null 2>&1 || packages+=(squid)
    command -v openssl >/dev/null 2>&1 || packages+=(openssl)
    command -v curl >/dev/null 2>&1 || packages+=(curl ca-certificates)
    command -v chromium >/dev/null 2>&1 || packages+=(chromium)
    command -v python3 >/dev/null 2>&1 || packages+=(python3 python3-pip)
    [[ -x /usr/sbin/apache2 ]] || packages+=(apache2)
    [[ -x /usr/sbin/lighttpd ]] || packages+=(lighttpd)
    command -v caddy >/dev/null 2>&1 || packages+=(caddy)
    command -v promtool >/dev/null 2>&1 || packages+=(prometheus)
    compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || packages+=(postgresql)
fi

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
if [[ ${#packages[@]} -gt 0 ]]; then
    echo "installing: ${packages[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

if [[ "${1:-}" == "--with-test-servers" ]] && ! python3 -c 'import aria2p' 2>/dev/null; then
    echo "installing: aria2p (PyPI)" >&2
    python3 -m pip install --quiet --disable-pip-version-check aria2p 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages aria2p
fi

if [[ "${1:-}" == "--with-test-servers" ]] && ! python3 -c 'import aiohttp_tus, tusclient' 2>/dev/null; then
    echo "installing: aiohttp-tus tuspy (PyPI)" >&2
    python3 -m pip install --quiet --disable-pip-version-check aiohttp-tus tuspy 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages aiohttp-tus tuspy
fi
