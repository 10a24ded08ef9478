#!/usr/bin/env bash
# Makes state-v2.sqlite: a state folder as Haul 0.1 (schema v2: a job row and a download row
# per download) leaves it, for the migration test. Run with that version's binary:
#   Tests/HaulTests/Fixtures/make-state-v2.sh /path/to/old/haul
# It serves files whose byte i is (i * 31 + 7) mod 256 (the test serves the same), and leaves:
#   queue haul-get: c.bin completed; a.bin killed halfway (running, ranges recorded);
#                   b.bin queued behind it (-j 1)
#   queue daemon:   d.bin added paused; e.bin paused halfway
# Paths are under /tmp/haul-v2-fixture and URLs on 127.0.0.1:18777; the test rewrites both.
set -euo pipefail
haul=$1
root=/tmp/haul-v2-fixture
port=18777
rm -rf "$root"; mkdir -p "$root/www" "$root/out"
python3 - "$root/www" <<'PY'
import sys
for name, size in [("a.bin", 2 << 20), ("b.bin", 300_000), ("c.bin", 100_000), ("d.bin", 200_000), ("e.bin", 2 << 20)]:
    open(f"{sys.argv[1]}/{name}", "wb").write(bytes((i * 31 + 7) & 0xFF for i in range(size)))
PY
python3 "$(dirname "$0")/../../../scripts/throttled_server.py" "$root/www" $port 400000 >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
state="$root/state"
url="http://127.0.0.1:$port"
"$haul" get -q -o "$root/out/c.bin" --state-dir "$state" "$url/c.bin"
printf '%s\n  out=a.bin\n%s\n  out=b.bin\n' "$url/a.bin" "$url/b.bin" > "$root/list.txt"
"$haul" get -q -j 1 -x 1 -d "$root/out" -i "$root/list.txt" --state-dir "$state" &
get=$!
while [ "$(stat -c %s "$root/out/a.bin.part" 2>/dev/null || echo 0)" -lt 900000 ]; do sleep 0.1; done
sleep 1.2   # a checkpoint (every second) records the bytes so far
kill -9 $get; wait $get 2>/dev/null || true
"$haul" daemon --rpc-listen-port 18778 -x 1 -d "$root/out" --state-dir "$state" -q &
daemon=$!
sleep 1
rpc() { curl -s -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}" http://127.0.0.1:18778/jsonrpc; }
rpc aria2.addUri "[[\"$url/d.bin\"],{\"pause\":\"true\"}]" >/dev/null
gid=$(rpc aria2.addUri "[[\"$url/e.bin\"]]" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"])')
while [ "$(stat -c %s "$root/out/e.bin.part" 2>/dev/null || echo 0)" -lt 700000 ]; do sleep 0.1; done
rpc aria2.pause "[\"$gid\"]" >/dev/null
kill -TERM $daemon; wait $daemon || true
sqlite3 "$state/state.sqlite" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null 2>&1 || true
cp "$state/state.sqlite" "$(dirname "$0")/state-v2.sqlite"
ls -la "$root/out"
