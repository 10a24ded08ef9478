#!/usr/bin/env bash
# Several connections against a server that throttles each one: a 256 MiB file from a private
# nginx on 127.0.0.1 with `limit_rate` per connection, fetched by `haul get -x 1`,
# `haul get -x 16` and `aria2c -x16 -s16`, interleaved, ROUNDS times each (default 3).
#
#   bench/segmented-256m.sh [ROUNDS] [RATE]      (RATE per connection, nginx syntax, default 4m)
#
# HAUL=PATH runs that haul instead of building one.
set -euo pipefail

ROUNDS=${1:-3}
RATE=${2:-4m}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-segmented
SRC=$WORK/www/256m.bin
SIZE=$((256 << 20))
source "$REPO/bench/nginx.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx not found; apt-get install -y nginx" >&2; exit 2; }
command -v aria2c >/dev/null || { echo "error: aria2c not found; apt-get install -y aria2" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time not found; apt-get install -y time" >&2; exit 2; }

if [[ -z "${HAUL:-}" ]]; then
    "$REPO/scripts/build-release.sh"
    HAUL=$REPO/.build/release/haul
fi
mkdir -p "$WORK/www"
[[ "$(stat -c %s "$SRC" 2>/dev/null || echo 0)" == "$SIZE" ]] || head -c "$SIZE" /dev/urandom > "$SRC"
SRC_SHA=$(sha256sum < "$SRC" | cut -d' ' -f1)
trap 'stop_nginx; rm -rf "$WORK/out" "$WORK/nginx"' EXIT
start_nginx "$WORK/nginx" "$WORK/www" "$RATE"
URL=http://127.0.0.1:$PORT/256m.bin

command_for() {
    case "$1" in
        haul-x1) echo "$HAUL get -q -x 1 -o $WORK/out/f.bin --state-dir $WORK/out/state $URL" ;;
        haul-x16) echo "$HAUL get -q -x 16 -o $WORK/out/f.bin --state-dir $WORK/out/state $URL" ;;
        aria2c-x16) echo "aria2c -q -x16 -s16 --min-split-size=1M --file-allocation=none -d $WORK/out -o f.bin $URL" ;;
    esac
}
TOOLS=(haul-x16 aria2c-x16 haul-x1)
echo "== $0 $*: 256 MiB, nginx limit_rate $RATE per connection, $ROUNDS rounds, order rotated"
for tool in "${TOOLS[@]}"; do echo "  $tool: $(command_for "$tool")"; done
declare -A WALLS
FAILED=0
for ((round = 0; round < ROUNDS; round++)); do
    for ((i = 0; i < ${#TOOLS[@]}; i++)); do
        tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
        rm -rf "$WORK/out"; mkdir -p "$WORK/out"; sync
        /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" $(command_for "$tool") || true
        read -r wall user sys rss < "$WORK/time.txt"
        sha=$(sha256sum < "$WORK/out/f.bin" 2>/dev/null | cut -d' ' -f1 || true)
        verdict=ok; [[ "$sha" == "$SRC_SHA" ]] || { verdict="FAILED: wrong bytes"; FAILED=1; }
        printf 'round %d %-11s wall %7.2f s  cpu %5.2f s  rss %4d MiB  %s\n' $((round + 1)) "$tool" "$wall" \
            "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024)) "$verdict"
        [[ $verdict == ok ]] && WALLS[$tool]+="$wall "
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
for tool in "${TOOLS[@]}"; do printf '%-11s median wall %7.2f s\n' "$tool" "$(median <<<"${WALLS[$tool]:-}")"; done
awk -v a="$(median <<<"${WALLS[haul-x1]:-}")" -v b="$(median <<<"${WALLS[haul-x16]:-}")" \
    'BEGIN { printf "haul -x 16 is %.1fx faster than -x 1\n", a / b }'
exit $FAILED
