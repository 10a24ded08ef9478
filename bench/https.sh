#!/usr/bin/env bash
# HTTPS, the common case: a private nginx on 127.0.0.1 serving TLS with HTTP/2 offered (a test CA
# made with openssl, once; bench/tls.sh).
#  1. One big file (default 1 GiB), interleaved rounds, caches dropped before each run when
#     /proc/sys/vm/drop_caches is writable: haul at its defaults (4 HTTP/1.1 connections), haul
#     -x 1, curl at its defaults (HTTP/2 over TLS), aria2c -x4 -s4. With --all also curl over
#     HTTP/1.1, haul -x 1 --http2 and haul -x 4 --http2.
#  2. Many small files (default 10000x1K) with 16 at once: bench/many-files.sh --https with curl
#     -Z --parallel-max 16 (HTTP/2 multiplexed), aria2c -j16, haul -j 16 (kept-alive HTTP/1.1)
#     and haul -j 16 --http2.
# Prints wall time, CPU (user + system) and peak RSS of every run and the medians; checks every
# download's bytes.
#
#   bench/https.sh [--rounds N] [--size-mib N] [--files JOB] [--all] [--only big|many] [--rate R]
#
# --rounds N    rounds of each part (default 3), the order rotated each round
# --size-mib N  the big file's size in MiB (default 1024)
# --files JOB   the many-files job, COUNTxSIZE as in bench/many-files.sh (default 10000x1K)
# --all         part 1 also runs curl-h1, haul-x1-h2 and haul-x4-h2
# --only P      run only part 1 (big) or part 2 (many)
# --rate R      nginx limit_rate for part 1, per request (over HTTP/2 per stream; default none)
# HAUL=PATH runs that haul instead of building one.
set -euo pipefail

usage() { sed -n '2,/^# HAUL=/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
ROUNDS=3 SIZE_MIB=1024 FILES=10000x1K ALL= ONLY= RATE=
while (( $# )); do
    case "$1" in
        --rounds) ROUNDS=${2:-}; shift 2 ;;
        --size-mib) SIZE_MIB=${2:-}; shift 2 ;;
        --files) FILES=${2:-}; shift 2 ;;
        --all) ALL=1; shift ;;
        --only) ONLY=${2:-}; shift 2 ;;
        --rate) RATE=${2:-}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
for n in "$ROUNDS" "$SIZE_MIB"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error: '$n' is not a positive number" >&2; exit 2; }; done
[[ -z "$ONLY" || "$ONLY" == big || "$ONLY" == many ]] || { echo "error: --only takes big or many" >&2; exit 2; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-https
SRC=$WORK/www/f.bin
SIZE=$((SIZE_MIB << 20))
source "$REPO/bench/nginx.sh"
source "$REPO/bench/tls.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx not found; apt-get install -y nginx" >&2; exit 2; }
for tool in aria2c curl sha256sum; do
    command -v $tool >/dev/null || { echo "error: $tool not found; apt-get install -y ${tool/aria2c/aria2}" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time not found; apt-get install -y time" >&2; exit 2; }

HAUL=${HAUL:-}
if [[ -z "$HAUL" ]]; then
    "$REPO/scripts/build-release.sh" || { echo "error: haul did not build" >&2; exit 2; }
    HAUL=$REPO/.build/release/haul
fi
HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")

echo "== $0 ${*:-}"
echo "machine: $(nproc) cores, $(uname -srm), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "versions: $("$NGINX" -v 2>&1) | $(curl --version | head -n1 | cut -d' ' -f1-2) | $(aria2c --version | head -n1)"
echo "haul: $HAUL ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit'))"

STATUS=0
if [[ "$ONLY" != many ]]; then
    make_bench_tls "$WORK/tls"
    mkdir -p "$WORK/www"
    [[ "$(stat -c %s "$SRC" 2>/dev/null || echo 0)" == "$SIZE" ]] || head -c "$SIZE" /dev/urandom > "$SRC"
    SRC_SHA=$(sha256sum < "$SRC" | cut -d' ' -f1)
    trap 'stop_nginx; rm -rf "$WORK/out" "$WORK/nginx"' EXIT
    NGINX_TLS_CERT=$BENCH_CERT NGINX_TLS_KEY=$BENCH_KEY start_nginx "$WORK/nginx" "$WORK/www" "$RATE"
    URL=https://127.0.0.1:$PORT/f.bin
    CA=$BENCH_CA

    command_for() {
        local out=$WORK/out/f.bin state=$WORK/out/state
        case "$1" in
            curl) echo "curl -s --cacert $CA -o $out $URL" ;;
            curl-h1) echo "curl -s --http1.1 --cacert $CA -o $out $URL" ;;
            haul) echo "$HAUL get -q --ca-certificate $CA -o $out --state-dir $state $URL" ;;
            haul-x1) echo "$HAUL get -q -x 1 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
            haul-x1-h2) echo "$HAUL get -q -x 1 --http2 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
            haul-x4-h2) echo "$HAUL get -q -x 4 --http2 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
            aria2c-x4) echo "aria2c -q -x4 -s4 --min-split-size=1M --file-allocation=none --ca-certificate=$CA -d $WORK/out -o f.bin $URL" ;;
        esac
    }
    TOOLS=(haul haul-x1 curl aria2c-x4)
    [[ -n "$ALL" ]] && TOOLS+=(curl-h1 haul-x1-h2 haul-x4-h2)
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        CACHE_POLICY="sync; echo 3 > /proc/sys/vm/drop_caches; cat SOURCE > /dev/null"
    else
        CACHE_POLICY="sync; cat SOURCE > /dev/null (drop_caches not writable: caches only equalised)"
    fi
    echo
    echo "-- part 1: $SIZE_MIB MiB over HTTPS (HTTP/2 offered), nginx limit_rate ${RATE:-none}, $ROUNDS rounds, order rotated"
    echo "   before each run: $CACHE_POLICY"
    for tool in "${TOOLS[@]}"; do echo "   $tool: $(command_for "$tool")"; done
    declare -A WALLS CPUS RSSES
    for ((round = 0; round < ROUNDS; round++)); do
        for ((i = 0; i < ${#TOOLS[@]}; i++)); do
            tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
            rm -rf "$WORK/out"; mkdir -p "$WORK/out"; sync
            if [[ -w /proc/sys/vm/drop_caches ]]; then echo 3 > /proc/sys/vm/drop_caches || true; fi
            cat "$SRC" > /dev/null
            # shellcheck disable=SC2046  # the command is word-split on purpose (no spaces in paths)
            /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" $(command_for "$tool") || true
            read -r wall user sys rss < <(tail -n 1 "$WORK/time.txt")
            sha=$(sha256sum < "$WORK/out/f.bin" 2>/dev/null | cut -d' ' -f1 || true)
            verdict=ok
            [[ "$sha" == "$SRC_SHA" ]] || { verdict="FAILED: $(head -n 1 "$WORK/time.txt" | grep -v "^[0-9]" || echo "wrong bytes")"; STATUS=1; }
            cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
            printf 'round %d %-11s wall %7.2f s  cpu %5.2f s  rss %5.1f MiB  %s\n' $((round + 1)) "$tool" "$wall" "$cpu" "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" "$verdict"
            [[ $verdict == ok ]] && { WALLS[$tool]+="$wall "; CPUS[$tool]+="$cpu "; RSSES[$tool]+="$rss "; }
        done
    done
    median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
    echo
    echo "| $SIZE_MIB MiB over HTTPS | wall s (median) | CPU s (median) | peak RSS MiB (median) | wall / curl |"
    echo "| --- | --- | --- | --- | --- |"
    curl_wall=$(median <<<"${WALLS[curl]:-}")
    for tool in "${TOOLS[@]}"; do
        w=$(median <<<"${WALLS[$tool]:-}")
        awk -v t="$tool" -v w="$w" -v c="$(median <<<"${CPUS[$tool]:-}")" -v r="$(median <<<"${RSSES[$tool]:-}")" -v cw="$curl_wall" \
            'BEGIN { printf "| %s | %.2f | %.2f | %.1f | %.2fx |\n", t, w, c, r / 1024, (cw > 0 ? w / cw : 0) }'
    done
    stop_nginx; rm -rf "$WORK/out" "$WORK/nginx"; trap - EXIT
fi

if [[ "$ONLY" != big ]]; then
    echo
    echo "-- part 2: $FILES over HTTPS, 16 at once (bench/many-files.sh --https)"
    "$REPO/bench/many-files.sh" "$FILES" --https --rounds "$ROUNDS" --tools curl,aria2c,haul,haul-h2 --haul "$HAUL" || STATUS=1
fi
exit $STATUS
