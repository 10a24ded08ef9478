#!/usr/bin/env bash
# Downloads one 1 GiB file from a private nginx on 127.0.0.1 with haul, curl, wget and
# aria2c, ROUNDS times each, and prints median wall time, CPU time and peak RSS per tool.
#
#   bench/download-1g.sh [--no-haul] [--flush] [ROUNDS]     (ROUNDS defaults to 5)
#
# haul runs twice per round: `haul` with one connection (`-x 1`, like the others) and `haul-x4`
# with its default of 4 connections. HAUL=PATH runs that haul instead of building one.
# --no-haul  skip haul (and its release build): tests the harness while haul is unfinished.
# --flush    time every tool as `TOOL && sync -d OUT`: haul fdatasyncs before it returns, the
#            others leave the file in the page cache, so this is the like-for-like durable time.
# See bench/README.md for what is measured and the caveats.
set -euo pipefail

ROUNDS=5 WITH_HAUL=1 FLUSH=0
for arg in "$@"; do
    case "$arg" in
        --no-haul) WITH_HAUL=0 ;;
        --flush) FLUSH=1 ;;
        ''|*[!0-9]*) echo "usage: $0 [--no-haul] [--flush] [ROUNDS]" >&2; exit 2 ;;
        *) ROUNDS=$arg ;;
    esac
done
(( ROUNDS >= 1 )) || { echo "ROUNDS must be at least 1" >&2; exit 2; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench
SRC=$WORK/www/1g.bin
SIZE=$((1024 * 1024 * 1024))
source "$(dirname "${BASH_SOURCE[0]}")/nginx.sh"

need() { [[ -n "$2" && -x "$2" ]] || { echo "error: $1 not found; install it: apt-get install -y $3" >&2; exit 2; }; }
need nginx "$NGINX" nginx
need curl "$(command -v curl || true)" curl
need wget "$(command -v wget || true)" wget
need aria2c "$(command -v aria2c || true)" aria2
need /usr/bin/time /usr/bin/time time

TOOLS=(curl wget aria2c)
if (( WITH_HAUL )); then
    if [[ -z "${HAUL:-}" ]]; then
        # Build first: a failed build should stop us before minutes of downloading.
        "$REPO/scripts/build-release.sh" || {
            echo "error: haul did not build; run with --no-haul to benchmark the other tools" >&2; exit 2; }
        HAUL=$REPO/.build/release/haul
    fi
    [[ -x "$HAUL" ]] || { echo "error: $HAUL missing; use --no-haul" >&2; exit 2; }
    TOOLS=(haul haul-x4 "${TOOLS[@]}")
fi

mkdir -p "$WORK/www" "$WORK/out" "$WORK/nginx"
# Random bytes so no layer can compress; made once and reused, since writing it costs seconds.
if [[ "$(stat -c %s "$SRC" 2>/dev/null || echo 0)" != "$SIZE" || ! -s "$SRC.sha256" ]]; then
    echo "making $SRC (1 GiB of random bytes)..."
    head -c "$SIZE" /dev/urandom > "$SRC.tmp" && mv "$SRC.tmp" "$SRC"
    sha256sum < "$SRC" | cut -d' ' -f1 > "$SRC.sha256"
fi
SRC_SHA=$(cat "$SRC.sha256")

cleanup() {
    stop_nginx
    rm -rf "$WORK/out" "$WORK/nginx"   # the source file stays for the next run
}
trap cleanup EXIT

start_nginx "$WORK/nginx" "$WORK/www" || exit 2
URL=http://127.0.0.1:$PORT/1g.bin

# The command each tool runs, with OUT as its output path.
# Paths are %q-quoted because the line is both printed and eval'ed.
command_for() {
    local out dir name state
    out=$(printf %q "$1") dir=$(printf %q "$(dirname "$1")") name=$(printf %q "$(basename "$1")")
    state=$(printf %q "$WORK/out/state")
    case "$2" in
        haul) echo "$(printf %q "$HAUL") get -q -x 1 -o $out $URL --state-dir $state" ;;
        haul-x4) echo "$(printf %q "$HAUL") get -q -o $out $URL --state-dir $state" ;;
        curl) echo "curl -s -o $out $URL" ;;
        wget) echo "wget -q -O $out $URL" ;;
        aria2c) echo "aria2c -q -x1 -s1 --file-allocation=none --allow-overwrite=true -d $dir -o $name $URL" ;;
    esac
}

if [[ -w /proc/sys/vm/drop_caches ]]; then
    CACHE_POLICY="sync; echo 3 > /proc/sys/vm/drop_caches; cat SOURCE > /dev/null (cold caches, then the source re-read into cache)"
else
    CACHE_POLICY="sync; cat SOURCE > /dev/null (drop_caches not writable: caches are only equalised, the source is cached for every tool)"
fi
# Same state for every run: the previous output is deleted before the sync, so no dirty pages
# of it are written back during the next run; the source is fully in cache; nothing else is.
settle() {
    rm -rf "$WORK/out"; mkdir -p "$WORK/out"
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then echo 3 > /proc/sys/vm/drop_caches || true; fi
    cat "$SRC" > /dev/null
}

echo "== haul download benchmark: $0 $*"
echo "machine: $(nproc) cores, $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "memory: $(free -m | awk '/^Mem:/ {print $2}') MiB; work dir $WORK on $(df -P "$WORK" | awk 'NR==2 {print $1}')"
echo "versions: $("$NGINX" -v 2>&1) | $(curl --version | head -n1 | cut -d' ' -f1-2) | $(wget --version | head -n1 | cut -d' ' -f1-3) | $(aria2c --version | head -n1)"
(( WITH_HAUL )) && echo "haul: $HAUL ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit'))"
echo "between runs: $CACHE_POLICY"
echo "timed with: /usr/bin/time -f '%e %U %S %M'$( (( FLUSH )) && echo ", each command followed by sync -d OUT inside the timing")"
echo "rounds: $ROUNDS, order rotated by one tool per round"
for tool in "${TOOLS[@]}"; do echo "  $tool: $(command_for "$WORK/out/$tool.bin" "$tool")"; done
echo

FAILED=0
declare -A RESULTS CHECKED MED_WALL MED_CPU
for ((round = 0; round < ROUNDS; round++)); do
    for ((i = 0; i < ${#TOOLS[@]}; i++)); do
        tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
        out=$WORK/out/$tool.bin
        settle
        cmd=$(command_for "$out" "$tool")
        (( FLUSH )) && cmd="sh -c '$cmd && sync -d $(printf %q "$out")'"
        status=0
        eval "/usr/bin/time -f '%e %U %S %M' -o '$WORK/out/time.txt' $cmd" || status=$?
        read -r wall user sys rss < <(tail -n 1 "$WORK/out/time.txt") || { wall=0 user=0 sys=0 rss=0; }
        size=$(stat -c %s "$out" 2>/dev/null || echo 0)
        verdict=ok
        if (( status != 0 )); then verdict="FAILED: exit status $status"
        elif [[ "$size" != "$SIZE" ]]; then verdict="FAILED: $size bytes, expected $SIZE"
        elif [[ -z "${CHECKED[$tool]:-}" ]]; then   # hashing costs seconds: once per tool
            CHECKED[$tool]=1
            [[ "$(sha256sum < "$out" | cut -d' ' -f1)" == "$SRC_SHA" ]] && verdict="ok (sha256 matches)" \
                || verdict="FAILED: sha256 differs from the source"
        fi
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
        printf 'round %d %-7s wall %6.2f s  cpu %6.2f s  rss %5d MiB  %s\n' \
            $((round + 1)) "$tool" "$wall" "$cpu" $((rss / 1024)) "$verdict"
        if [[ "$verdict" == ok* ]]; then
            RESULTS[$tool]+="$wall $cpu $rss"$'\n'
        else
            FAILED=1
            echo "!!!!!! $tool round $((round + 1)) downloaded a wrong file: $verdict" >&2
        fi
    done
done

# Median of column $1 of the successful runs of one tool.
median() { awk -v c="$1" 'NF { print $c }' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
printf '%-8s %5s %12s %12s %14s\n' tool runs "wall s (med)" "cpu s (med)" "peak RSS MiB"
for tool in "${TOOLS[@]}"; do
    runs=${RESULTS[$tool]:-}
    MED_WALL[$tool]=$(median 1 <<<"$runs"); MED_CPU[$tool]=$(median 2 <<<"$runs")
    printf '%-8s %5d %12.2f %12.2f %14.1f\n' "$tool" "$(grep -c . <<<"$runs" || true)" \
        "${MED_WALL[$tool]}" "${MED_CPU[$tool]}" "$(median 3 <<<"$runs" | awk '{ print $1 / 1024 }')"
done
if (( WITH_HAUL )); then
    awk -v hw="${MED_WALL[haul]}" -v cw="${MED_WALL[curl]}" -v hc="${MED_CPU[haul]}" -v cc="${MED_CPU[curl]}" \
        'BEGIN { printf "haul/curl: wall %.2fx, cpu %.2fx\n", hw / cw, (cc > 0 ? hc / cc : 0) }'
fi
(( FAILED )) && { echo "!!!!!! at least one download was wrong: see above" >&2; exit 1; }
exit 0
