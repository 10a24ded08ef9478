#!/usr/bin/env bash
# Sets Haul up and shows its main job on this machine: builds `haul` (release), serves a
# 200 MiB file from a local web server on 127.0.0.1, downloads it, interrupts the download
# with Ctrl-C halfway, reruns the same command to finish it, and checks the bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build-release.sh
haul=.build/release/haul

work=$(mktemp -d "${TMPDIR:-/tmp}/haul-demo.XXXXXX")
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/www"
head -c $((200 << 20)) /dev/urandom > "$work/www/demo.bin"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# A server that sends 10 MiB/s per connection (see scripts/throttled_server.py), so the
# download (4 connections by default) takes about 5 s and there is time to interrupt it.
python3 scripts/throttled_server.py "$work/www" "$port" $((10 << 20)) &
server=$!
sleep 1

url="http://127.0.0.1:$port/demo.bin"
echo "\$ haul get -d $work/downloads $url   (interrupted after 2 s)"
"$haul" get -d "$work/downloads" --state-dir "$work/state" "$url" &
sleep 2
kill -INT $! && wait $! || echo "(exit status $? — interrupted, progress saved)"
echo "\$ haul get -d $work/downloads $url   (the same command again)"
"$haul" get -d "$work/downloads" --state-dir "$work/state" "$url"

want=$(sha256sum < "$work/www/demo.bin")
got=$(sha256sum < "$work/downloads/demo.bin")
[[ "$want" == "$got" ]] && echo "OK: the downloaded file is byte-identical (sha-256 ${got%% *})"
