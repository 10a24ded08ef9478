#!/usr/bin/env bash
# One file from several mirrors of different speeds: a 128 MiB file on private nginx on
# 127.0.0.1, .2 and .3, holding each connection to 2, 4 and 8 MiB/s (`limit_rate`), and on
# 127.0.0.4 at 8 MiB/s a copy of the same length with one corrupt MiB.
#
# 1. Three mirrors: `haul get -x 12 --max-connections-per-host 4` from an input file with the
#    three URLs on one line (tab-separated) against `aria2c -s 12 -x 4` with the same URLs (each
#    at its own defaults otherwise: the issue's commands), and against aria2c tuned to haul's
#    1 MiB split size (`--min-split-size=1M`, "aria2c-1M"), ROUNDS times each (default 1),
#    interleaved; against the physical limit, 128 MiB / (4 x (2 + 4 + 8) MiB/s) = 2.3 s.
# 2. A Metalink (v4, 1 MiB sha-256 pieces and the whole file's sha-256) listing the three and the
#    corrupt fourth at the highest priority: `haul get -M` and `aria2c -M`, each must end
#    byte-identical; haul must name the corrupt mirror.
# 3. kill -9: the three-mirror haul download killed halfway and run again; the access logs of
#    the three nginx must show at most the missing bytes plus 1 MiB per connection fetched again.
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
RATES=(2m 4m 8m 8m)
ADDRESSES=(127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4)
BAD=$WORK/www-bad/128m.bin
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
# The fourth mirror's copy: the same length, MiB 8 overwritten (in the share it serves first).
mkdir -p "$WORK/www-bad"
if [[ ! -f "$BAD" || "$SRC" -nt "$BAD" || "$(cat "$WORK/corrupt-mib" 2>/dev/null)" != 8 ]]; then
    cp "$SRC" "$BAD"
    head -c $((1 << 20)) /dev/urandom | dd of="$BAD" bs=1M seek=8 conv=notrunc status=none
    echo 8 > "$WORK/corrupt-mib"
fi

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    rm -rf "$WORK/out" "$WORK/nginx"-*
}
trap cleanup EXIT
URLS=()
for i in 0 1 2 3; do
    root=$WORK/www; (( i == 3 )) && root=$WORK/www-bad
    NGINX_ACCESS_LOG_FORMAT='$body_bytes_sent $http_range' NGINX_ADDRESS=${ADDRESSES[i]} start_nginx "$WORK/nginx-$i" "$root" "${RATES[i]}"
    PIDS+=("$NGINX_PID")
    URLS+=("http://${ADDRESSES[i]}:$PORT/128m.bin")
done
BAD_URL=${URLS[3]}
URLS=("${URLS[@]:0:3}")
LIST=$WORK/list.txt
(IFS=$'\t'; printf '%s\n' "${URLS[*]}") > "$LIST"
printf '  out=f.bin\n' >> "$LIST"

command_for() {
    case "$1" in
        haul) echo "$HAUL get -q -x 12 --max-connections-per-host 4 -d $WORK/out -i $LIST --state-dir $WORK/out/state" ;;
        aria2c) echo "aria2c -q -s 12 -x 4 --file-allocation=none -d $WORK/out -o f.bin ${URLS[*]}" ;;
        aria2c-1M) echo "aria2c -q -s 12 -x 4 --min-split-size=1M --file-allocation=none -d $WORK/out -o f.bin ${URLS[*]}" ;;
    esac
}
TOOLS=(haul aria2c aria2c-1M)
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
        printf 'round %d %-9s wall %7.2f s  cpu %5.2f s  rss %4d MiB  %s\n' $((round + 1)) "$tool" "$wall" \
            "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024)) "$verdict"
        [[ $verdict == ok ]] && WALLS[$tool]+="$wall "
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
LIMIT=$(awk 'BEGIN { printf "%.2f", 128 / (4 * (2 + 4 + 8)) }')
echo
for tool in "${TOOLS[@]}"; do printf '%-9s median wall %7.2f s\n' "$tool" "$(median <<<"${WALLS[$tool]:-}")"; done
awk -v h="$(median <<<"${WALLS[haul]:-}")" -v a="$(median <<<"${WALLS[aria2c]:-}")" \
    -v t="$(median <<<"${WALLS[aria2c-1M]:-}")" -v l="$LIMIT" \
    'BEGIN { printf "physical limit %.2f s; haul %.2fx the limit, %.2fx aria2c, %.2fx aria2c-1M\n", l, h / l, h / a, h / t }'

# 2. The Metalink with a corrupt mirror at the highest priority.
META=$WORK/f.meta4
python3 - "$SRC" "$META" "$BAD_URL" "${URLS[@]}" <<'PY'
import hashlib, os, sys
src, out, bad, *good = sys.argv[1:]
pieces, whole = [], hashlib.sha256()
with open(src, "rb") as f:
    while chunk := f.read(1 << 20):
        whole.update(chunk)
        pieces.append(hashlib.sha256(chunk).hexdigest())
size = os.path.getsize(src)
urls = [f'    <url priority="1">{bad}</url>'] + [f'    <url priority="{i + 2}">{u}</url>' for i, u in enumerate(good)]
hashes = "\n".join(f"      <hash>{h}</hash>" for h in pieces)
open(out, "w").write(f"""<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="urn:ietf:params:xml:ns:metalink">
  <file name="f.bin">
    <size>{size}</size>
    <hash type="sha-256">{whole.hexdigest()}</hash>
    <pieces length="{1 << 20}" type="sha-256">
{hashes}
    </pieces>
{chr(10).join(urls)}
  </file>
</metalink>
""")
PY
echo
echo "== Metalink: the three mirrors and a fourth (priority 1) serving one corrupt MiB"
for tool in haul aria2c; do
    rm -rf "$WORK/out"; mkdir -p "$WORK/out"; : > "$WORK/nginx-3/access.log"; sync
    case $tool in
        haul) cmd="$HAUL get -x 12 --max-connections-per-host 4 --min-split-size 1M -d $WORK/out -M $META --state-dir $WORK/out/state" ;;
        aria2c) cmd="aria2c -q -s 12 -x 4 --min-split-size=1M --file-allocation=none -d $WORK/out -M $META" ;;
    esac
    # shellcheck disable=SC2086
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" timeout 120 $cmd > "$WORK/$tool.log" 2>&1 || true
    read -r wall user sys rss < <(tail -n 1 "$WORK/time.txt") || { wall=0 user=0 sys=0 rss=0; }
    sha=$(sha256sum < "$WORK/out/f.bin" 2>/dev/null | cut -d' ' -f1 || true)
    verdict=ok; [[ "$sha" == "$SRC_SHA" ]] || { verdict="FAILED: wrong or missing bytes"; FAILED=1; }
    from_bad=$(awk '{ s += $1 } END { printf "%.1f", s / 1048576 }' "$WORK/nginx-3/access.log")
    printf '%-7s wall %7.2f s  cpu %5.2f s  %s; %s MiB from the corrupt mirror\n' "$tool" "$wall" \
        "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$verdict" "$from_bad"
    if [[ $tool == haul ]]; then
        named=$(tr '\r' '\n' < "$WORK/haul.log" | grep -m1 -o "dropped source ${BAD_URL}: .*digest" || true)
        if [[ -n "$named" ]]; then echo "        named: $named"; else echo "        FAILED: the corrupt mirror was not named"; FAILED=1; fi
    fi
done

# 3. kill -9 halfway through the three-mirror download, then the same command.
echo
echo "== kill -9 at half, then the same command: bytes the three nginx sent"
rm -rf "$WORK/out"; mkdir -p "$WORK/out"; sync
for i in 0 1 2; do : > "$WORK/nginx-$i/access.log"; done
# shellcheck disable=SC2046
$(command_for haul) & HAUL_PID=$!
# Halfway by the three-mirror run above (the part file's blocks are reserved at once, so its
# size says nothing).
sleep "$(awk -v w="$(median <<<"${WALLS[haul]:-2.3}")" 'BEGIN { printf "%.2f", w / 2 }')"
kill -9 "$HAUL_PID"; wait "$HAUL_PID" 2>/dev/null || true
sleep 0.5
# The store's two records: bytes flushed (trusted after a crash of the machine) and bytes
# written in this boot (trusted after a killed process; the column starts with the boot id).
mib() { tr ',' '\n' | awk -F- '$2 != "" { s += $2 - $1 } END { printf "%.1f", s / 1048576 }'; }
flushed=$(sqlite3 "$WORK/out/state/state.sqlite" "SELECT ranges FROM download" 2>/dev/null | mib)
written=$(sqlite3 "$WORK/out/state/state.sqlite" "SELECT substr(unsynced, 38) FROM download" 2>/dev/null | mib)
echo "recorded at the kill: $written MiB written in this boot, $flushed MiB of them flushed"
sent_before=$(cat "$WORK"/nginx-[012]/access.log | awk '{ s += $1 } END { print s + 0 }')
# shellcheck disable=SC2046
timeout 120 $(command_for haul) || true
sleep 0.5
sent_total=$(cat "$WORK"/nginx-[012]/access.log | awk '{ s += $1 } END { print s + 0 }')
# Every request of both runs (bytes sent, range asked), kept for a look after the run.
mkdir -p "$WORK/kill9-logs"; for i in 0 1 2; do cp "$WORK/nginx-$i/access.log" "$WORK/kill9-logs/nginx-$i.log"; done
sha=$(sha256sum < "$WORK/out/f.bin" 2>/dev/null | cut -d' ' -f1 || true)
verdict=ok; [[ "$sha" == "$SRC_SHA" ]] || { verdict="FAILED: wrong or missing bytes"; FAILED=1; }
allowed=$((SIZE + 12 * (1 << 20)))
(( sent_total <= allowed )) || { verdict="$verdict; FAILED: more than the file and 1 MiB a connection"; FAILED=1; }
awk -v b="$sent_before" -v t="$sent_total" -v s="$SIZE" -v a="$allowed" -v v="$verdict" 'BEGIN {
    printf "before the kill %.1f MiB, after the rerun %.1f MiB in all: %.1f MiB fetched twice (at most %.1f allowed: 1 MiB a connection); %s\n",
        b / 1048576, t / 1048576, (t - s) / 1048576, (a - s) / 1048576, v }'
exit $FAILED
