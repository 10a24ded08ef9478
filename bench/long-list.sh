#!/usr/bin/env bash
# A very long list: `haul get -j 4 -i LIST` of N URLs (default 1,000,000), each a distinct name
# served by one private nginx on 127.0.0.1 (every path answers the same 1 KiB; nginx's
# limit_rate 2k lets an answer send a second's allowance at once, so each file comes at once and
# the downloads complete, a few thousand a second, while the list is queued behind them; the
# limit only keeps a slow reader from being flooded). Reports the time until the first file
# is complete, then for SECONDS seconds (default 60) the downloads in the store and haul's RSS,
# and at the end RSS per queued download. haul is killed (-9) at the end; nothing is verified.
#
#   bench/long-list.sh [N] [SECONDS]      HAUL=PATH runs that haul instead of building one
set -euo pipefail

N=${1:-1000000}
SECONDS_TO_WATCH=${2:-60}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-long
source "$REPO/bench/nginx.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx not found; apt-get install -y nginx" >&2; exit 2; }
HAUL=${HAUL:-}
if [[ -z "$HAUL" ]]; then "$REPO/scripts/build-release.sh"; HAUL=$REPO/.build/release/haul; fi

rm -rf "$WORK"; mkdir -p "$WORK/www"
head -c 1024 /dev/urandom > "$WORK/www/one.bin"
trap 'kill -9 $HAUL_PID 2>/dev/null || true; stop_nginx; rm -rf "$WORK"' EXIT
# Every path is the same small file.
NGINX_SERVER_EXTRA='location / { try_files /one.bin =404; }' start_nginx "$WORK/nginx" "$WORK/www" 2k
awk -v n="$N" -v port="$PORT" 'BEGIN { for (i = 0; i < n; i++) printf "http://127.0.0.1:%d/f%07d.bin\n", port, i }' > "$WORK/list"
echo "== $0 $*: $N URLs ($(du -h "$WORK/list" | cut -f1) list), haul get -j 4, nginx limit_rate 2k"

start=$(date +%s.%N)
"$HAUL" get -q -j 4 -i "$WORK/list" -d "$WORK/out" --state-dir "$WORK/state" &
HAUL_PID=$!
first=
for ((t = 0; t < SECONDS_TO_WATCH * 10; t++)); do
    if [[ -z "$first" ]] && compgen -G "$WORK/out/f*.bin" >/dev/null && ls "$WORK/out" | grep -qv part; then
        first=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
        echo "first file complete after $first s"
    fi
    if (( t % 50 == 0 )); then
        rows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect('file:$WORK/state/state.sqlite?mode=ro', uri=True).execute('select count(*) from download').fetchone()[0])" 2>/dev/null || echo 0)
        rss=$(awk '/VmRSS/ { print int($2 / 1024) }' /proc/$HAUL_PID/status 2>/dev/null || echo 0)
        echo "t=$((t / 10)) s: $rows downloads in the store, RSS $rss MiB"
    fi
    sleep 0.1
done
rows=$(python3 -c "import sqlite3; print(sqlite3.connect('file:$WORK/state/state.sqlite?mode=ro', uri=True).execute('select count(*) from download').fetchone()[0])")
hwm=$(awk '/VmHWM/ { print $2 }' /proc/$HAUL_PID/status)
echo "after $SECONDS_TO_WATCH s: $rows downloads queued, peak RSS $((hwm / 1024)) MiB, $(awk -v h="$hwm" -v r="$rows" 'BEGIN { printf "%.0f", h * 1024 / r }') bytes of peak RSS per queued download"
