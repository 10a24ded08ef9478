#!/usr/bin/env bash
# Uploads with haul against tuspy and curl -T, on 127.0.0.1:
#   1. a 256 MiB file to a tus server (aiohttp-tus, bench/tus-server.py) through a loopback
#      forwarder that counts the bytes each client sends (bench/count-forwarder.py): haul
#      against tuspy (8 MiB chunks), ROUNDS rounds alternating;
#   2. the same file with haul killed with -9 after 96 MiB went through the forwarder, then the
#      same command again: every byte sent in all, cut-off PATCHes and HTTP heads included;
#   3. a 512 MiB plain PUT to nginx WebDAV: haul against curl -T, ROUNDS rounds alternating,
#      the order switched every round, each with nginx's own time for it (the transfer alone),
#      then a 1-byte PUT of each (what a run costs besides the transfer: start, connection,
#      exit); the medians and their ratio at the end.
# Wall time (to the millisecond) and peak RSS (/usr/bin/time) of each; every upload is compared
# with its source.
#
#   bench/upload.sh [ROUNDS] [--put-only]     (ROUNDS defaults to 3; --put-only: part 3 alone)
#
# HAUL=PATH runs that haul instead of building a release one.
set -euo pipefail

ROUNDS=3 PUT_ONLY=
for arg in "$@"; do
    case "$arg" in
        --put-only) PUT_ONLY=1 ;;
        [1-9]*) ROUNDS=$arg ;;
        *) echo "usage: $0 [ROUNDS] [--put-only]" >&2; exit 2 ;;
    esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS] [--put-only]" >&2; exit 2; }
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-upload
source "$(dirname "${BASH_SOURCE[0]}")/nginx.sh"

python3 -c 'import aiohttp_tus, tusclient' 2>/dev/null || {
    echo "error: aiohttp-tus and tuspy missing: scripts/install-deps.sh --with-test-servers" >&2; exit 2; }
[[ -x "$NGINX" ]] || { echo "error: nginx not found" >&2; exit 2; }
if [[ -z "${HAUL:-}" ]]; then
    "$REPO/scripts/build-release.sh" || { echo "error: haul did not build" >&2; exit 2; }
    HAUL=$REPO/.build/release/haul
fi

rm -rf "$WORK/tus" "$WORK/www" "$WORK/state" "$WORK/nginx"
mkdir -p "$WORK/tus" "$WORK/www" "$WORK/nginx"
for size in 256 512; do
    [[ "$(stat -c %s "$WORK/$size.bin" 2>/dev/null || echo 0)" == $((size << 20)) ]] \
        || head -c $((size << 20)) /dev/urandom > "$WORK/$size.bin"
done

TUS_PID=
FORWARDER_PID=
cleanup() {
    [[ -n "$TUS_PID" ]] && kill "$TUS_PID" 2>/dev/null
    [[ -n "$FORWARDER_PID" ]] && kill "$FORWARDER_PID" 2>/dev/null
    stop_nginx
}
trap cleanup EXIT
TUS_PORT=$(shuf -i 20000-60999 -n 1)
python3 "$REPO/bench/tus-server.py" "$TUS_PORT" "$WORK/tus" "$WORK/counts.json" > "$WORK/tus.log" 2>&1 &
TUS_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null -X OPTIONS "http://127.0.0.1:$TUS_PORT/files" && break; sleep 0.1; done
FORWARDER_PORT=$(shuf -i 20000-60999 -n 1)
python3 "$REPO/bench/count-forwarder.py" "$FORWARDER_PORT" "$TUS_PORT" "$WORK/sent.json" > "$WORK/forwarder.log" 2>&1 &
FORWARDER_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null -X OPTIONS "http://127.0.0.1:$FORWARDER_PORT/files" && break; sleep 0.1; done
TUS=http://127.0.0.1:$FORWARDER_PORT/files
# Every byte clients sent through the forwarder so far.
sent() { python3 -c "import json; print(json.load(open('$WORK/sent.json'))['bytes'])"; }

# request_time: how long nginx took over each PUT, from its first byte to its answer — the
# transfer without either client's start and exit.
NGINX_ACCESS_LOG_FORMAT='$request_uri $request_time' \
    NGINX_SERVER_EXTRA="location /dav/ { alias \"$WORK/www/\"; dav_methods PUT; client_max_body_size 0; }" \
    start_nginx "$WORK/nginx" "$WORK/www" || exit 2
DAV=http://127.0.0.1:$PORT/dav

timed() {   # timed LABEL CHECK_FILE SOURCE COMMAND...
    local label=$1 check=$2 source=$3; shift 3
    rm -f "$check"
    sync   # the last run's written file is not flushed during this one
    local before; before=$(sent)
    local start; start=$(date +%s%N)
    /usr/bin/time -f '%M' -o "$WORK/time.txt" "$@" > /dev/null
    local wall; wall=$(awk -v ns=$(( $(date +%s%N) - start )) 'BEGIN { printf "%.3f", ns / 1e9 }')
    read -r rss < "$WORK/time.txt"
    LAST_WALL=$wall
    sleep 0.1   # the forwarder's count of the last bytes
    local verdict=ok
    cmp -s "$check" "$source" || verdict="FAILED: differs from the source"
    local through=""
    (( $(sent) > before )) && through=$(printf '  sent %d B' $(( $(sent) - before )))
    printf '%-34s wall %6.3f s  rss %5d MiB%s  %s\n' "$label" "$wall" $((rss / 1024)) "$through" "$verdict"
}

echo "== haul upload benchmark: $(nproc) cores, $(uname -sr); haul $("$HAUL" --version) at $(git -C "$REPO" rev-parse --short HEAD)"
if [[ -z "$PUT_ONLY" ]]; then
TUSPY="from tusclient import client; client.TusClient('$TUS').uploader('$WORK/256.bin', chunk_size=8 << 20, metadata={'filename': '256.bin'}).upload()"
for ((round = 1; round <= ROUNDS; round++)); do
    timed "round $round tus 256 MiB: haul" "$WORK/tus/256.bin" "$WORK/256.bin" \
        "$HAUL" put -q --protocol tus --state-dir "$WORK/state" "$WORK/256.bin" "$TUS"
    timed "round $round tus 256 MiB: tuspy" "$WORK/tus/256.bin" "$WORK/256.bin" python3 -c "$TUSPY"
done

before=$(sent)
"$HAUL" put -q --protocol tus --state-dir "$WORK/state" --limit-rate 64M "$WORK/256.bin" "$TUS" &
HAUL_PID=$!
for _ in $(seq 600); do (( $(sent) - before >= 96 << 20 )) && break; sleep 0.05; done
kill -9 "$HAUL_PID"; wait "$HAUL_PID" 2>/dev/null || true
sleep 0.1
at_kill=$(( $(sent) - before ))
rm -f "$WORK/tus/256.bin"
"$HAUL" put -q --protocol tus --state-dir "$WORK/state" "$WORK/256.bin" "$TUS"
sleep 0.1
total=$(( $(sent) - before ))
verdict=ok; cmp -s "$WORK/tus/256.bin" "$WORK/256.bin" || verdict="FAILED: differs from the source"
printf 'kill -9 at %d MiB, then rerun: %d bytes sent in all (file %d, +%d)  %s\n' \
    $((at_kill >> 20)) "$total" $((256 << 20)) $((total - (256 << 20))) "$verdict"
fi

# nginx's time for the last request.
served() {
    LAST_SERVED=$(tail -n 1 "$WORK/nginx/access.log" | cut -d' ' -f2)
    printf '%-34s nginx %6.3f s\n' "  $1" "$LAST_SERVED"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
put_haul() {
    timed "round $round PUT 512 MiB: haul" "$WORK/www/haul.bin" "$WORK/512.bin" \
        "$HAUL" put -q --protocol put --state-dir "$WORK/state" "$WORK/512.bin" "$DAV/haul.bin"
    served "of which the transfer"
    HAUL_WALLS+=("$LAST_WALL") HAUL_SERVED+=("$LAST_SERVED")
}
put_curl() {
    timed "round $round PUT 512 MiB: curl -T" "$WORK/www/curl.bin" "$WORK/512.bin" \
        curl -sS -f -T "$WORK/512.bin" "$DAV/curl.bin"
    served "of which the transfer"
    CURL_WALLS+=("$LAST_WALL") CURL_SERVED+=("$LAST_SERVED")
}
HAUL_WALLS=() HAUL_SERVED=() CURL_WALLS=() CURL_SERVED=()
head -c 1 /dev/urandom > "$WORK/1.bin"
for ((round = 1; round <= ROUNDS; round++)); do
    if (( round % 2 )); then put_haul; put_curl; else put_curl; put_haul; fi
    # A 1-byte PUT: what each costs besides the transfer (start, connection, exit).
    timed "round $round PUT 1 B: haul" "$WORK/www/haul1.bin" "$WORK/1.bin" \
        "$HAUL" put -q --protocol put --state-dir "$WORK/state" "$WORK/1.bin" "$DAV/haul1.bin"
    timed "round $round PUT 1 B: curl -T" "$WORK/www/curl1.bin" "$WORK/1.bin" curl -sS -f -T "$WORK/1.bin" "$DAV/curl1.bin"
done
haul_median=$(median "${HAUL_WALLS[@]}") curl_median=$(median "${CURL_WALLS[@]}")
printf 'PUT 512 MiB, median of %d: haul %s s (nginx %s s), curl -T %s s (nginx %s s): haul / curl %.2fx\n' "$ROUNDS" \
    "$haul_median" "$(median "${HAUL_SERVED[@]}")" "$curl_median" "$(median "${CURL_SERVED[@]}")" \
    "$(awk -v h="$haul_median" -v c="$curl_median" 'BEGIN { print h / c }')"
