#!/usr/bin/env bash
# One file from three mirrors of different speeds: a 128 MiB file on three private nginx, on
# 127.0.0.1, 127.0.0.2 and 127.0.0.3, holding each connection to 2, 4 and 8 MiB/s (`limit_rate`),
# fetched by `haul get -x 12 --max-connections-per-host 4` from an input file with the three URLs
# on one line (tab-separated) and by `aria2c -s 12 -x 4` with the same URLs, ROUNDS times each
# (default 1), interleaved; against the physical limit, 128 MiB / (4 x (2 + 4 + 8) MiB/s) = 2.3 s.
#
#   bench/mirrors.sh [ROUNDS]
#
# HAUL=PATH runs that haul instead of building one. Loopback only; each run is cut at 120 s.
set -euo pipefail

ROUNDS=${1:-1}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS]" >&2; exit 2; }
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-mirrors
SRC=$WORK/www/128m.bin
SIZE=$((128 << 20))
RATES=(2m 4m 8m)
ADDRESSES=(127.0.0.1 127.0.0.2 127.0.0.3)
source "$REPO/bench/nginx.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx not found; apt-get install -y nginx" >&2; exit 2; }
command -v aria2c >/dev/null || { echo "error: aria2c not found; apt-get install -y aria2" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time not found; apt-get install -y time" >&2; exit 2; }

if [[ -z "${HAUL:-}" ]]; then
    (cd "$REPO" && swift build -c release --static-swift-stdlib --product haul)
    HAUL=$REPO/.build/release/haul
fi
mkdir -p "$WORK/www"
[[ "$(stat -c %s "$SRC" 2>/dev/null || echo 0)" == "$SIZE" ]] || head -c "$SIZE" /dev/urandom > "$SRC"
SRC_SHA=$(sha256sum < "$SRC" | cut -d' ' -f1)

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    rm -rf "$WORK/out" "$WORK/nginx"-*
}
trap cleanup EXIT
URLS=()
for i in 0 1 2; do
    NGINX_ADDRESS=${ADDRESSES[i]} start_nginx "$WORK/nginx-$i" "$WORK/www" "${RATES[i]}"
    PIDS+=("$NGINX_PID")
    URLS+=("http://${ADDRESSES[i]}:$PORT/128m.bin")
done
LIST=$WORK/list.txt
(IFS=$'\t'; printf '%s\n' "${URLS[*]}") > "$LIST"
printf '  out=f.bin\n' >> "$LIST"

command_for() {
    case "$1" in
        haul) echo "$HAUL get -q -x 12 --max-connections-per-host 4 --min-split-size 1M -d $WORK/out -i $LIST --state-dir $WORK/out/state" ;;
        aria2c) echo "aria2c -q -s 12 -x 4 --min-split-size=1M --file-allocation=none -d $WORK/out -o f.bin ${URLS[*]}" ;;
    esac
}
TOOLS=(haul aria2c)
echo "== $0 $*: 128 MiB from three mirrors at 2, 4 and 8 MiB/s a connection, $ROUNDS rounds, order rotated"
echo "machine: $(nproc) cores, $(uname -srm); $("$NGINX" -v 2>&1); $(aria2c --version | head -n1)"
for tool in "${TOOLS[@]}"; do echo "  $tool: $(command_for "$tool")"; done
declare -A WALLS
FAILED=0
for ((round = 0; round < ROUNDS; round++)); do
    for ((i = 0; i < ${#TOOLS[@]}; i++)); do
        tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
        rm -rf "$WORK/out"; mkdir -p "$WORK/out"; sync
        # shellcheck disable=SC2046
        /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" timeout 120 $(command_for "$tool") || true
        read -r wall user sys rss < <(tail -n 1 "$WORK/time.txt") || { wall=0 user=0 sys=0 rss=0; }
        sha=$(sha256sum < "$WORK/out/f.bin" 2>/dev/null | cut -d' ' -f1 || true)
        verdict=ok; [[ "$sha" == "$SRC_SHA" ]] || { verdict="FAILED: wrong or missing bytes"; FAILED=1; }
        printf 'round %d %-7s wall %7.2f s  cpu %5.2f s  rss %4d MiB  %s\n' $((round + 1)) "$tool" "$wall" \
            "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024)) "$verdict"
        [[ $verdict == ok ]] && WALLS[$tool]+="$wall "
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
LIMIT=$(awk 'BEGIN { printf "%.2f", 128 / (4 * (2 + 4 + 8)) }')
echo
for tool in "${TOOLS[@]}"; do printf '%-7s median wall %7.2f s\n' "$tool" "$(median <<<"${WALLS[$tool]:-}")"; done
awk -v h="$(median <<<"${WALLS[haul]:-}")" -v a="$(median <<<"${WALLS[aria2c]:-}")" -v l="$LIMIT" \
    'BEGIN { printf "physical limit %.2f s; haul %.2fx the limit, %.2fx aria2c\n", l, h / l, h / a }'
exit $FAILED
