#!/usr/bin/env bash
# HTTPS and HTTP/2: a file from a private nginx on 127.0.0.1 serving TLS with HTTP/2 offered
# (a test CA made with openssl, once), fetched by curl over HTTP/2 and over HTTP/1.1, by
# `haul get -x 1` (one HTTP/1.1 connection), `haul get -x 1 --http2` (one HTTP/2 connection),
# `haul get -x 4` (four HTTP/1.1 connections) and `aria2c -x4 -s4` (four HTTP/1.1 connections),
# interleaved, ROUNDS times each. HAUL=PATH runs that haul instead of building one.
#
#   bench/https-h2.sh [ROUNDS] [SIZE_MIB] [RATE]
#
# ROUNDS   rounds, the order rotated each round (default 3)
# SIZE_MIB the file's size in MiB (default 512)
# RATE     nginx limit_rate, per request: over HTTP/2 that is per stream, not per connection
#          (default: none)
# HAUL_STREAMS=PATH also runs PATH as "haul-x4-streams": a haul built to send a segmented
#          download's requests as streams of one HTTP/2 connection (HTTPTransport with
#          separateConnections always false), for the comparison behind -x N's meaning.
set -euo pipefail

ROUNDS=${1:-3}
SIZE_MIB=${2:-512}
RATE=${3:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-https
SRC=$WORK/www/f.bin
SIZE=$((SIZE_MIB << 20))
source "$REPO/bench/nginx.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx not found; apt-get install -y nginx" >&2; exit 2; }
for tool in aria2c openssl curl; do
    command -v $tool >/dev/null || { echo "error: $tool not found; apt-get install -y ${tool/aria2c/aria2}" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time not found; apt-get install -y time" >&2; exit 2; }

HAUL=${HAUL:-}
if [[ -z "$HAUL" ]]; then (cd "$REPO" && swift build -c release --static-swift-stdlib --product haul); HAUL=$REPO/.build/release/haul; fi
mkdir -p "$WORK/www" "$WORK/tls"
[[ "$(stat -c %s "$SRC" 2>/dev/null || echo 0)" == "$SIZE" ]] || head -c "$SIZE" /dev/urandom > "$SRC"
SRC_SHA=$(sha256sum < "$SRC" | cut -d' ' -f1)
CA=$WORK/tls/ca.pem
if [[ ! -s "$WORK/tls/server.pem" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=bench-ca \
        -keyout "$WORK/tls/ca.key" -out "$CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
        -keyout "$WORK/tls/server.key" -out "$WORK/tls/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' > "$WORK/tls/ext.cnf"
    openssl x509 -req -in "$WORK/tls/server.csr" -CA "$CA" -CAkey "$WORK/tls/ca.key" -CAcreateserial -days 30 \
        -extfile "$WORK/tls/ext.cnf" -out "$WORK/tls/server.pem" 2>/dev/null
fi
trap 'stop_nginx; rm -rf "$WORK/out" "$WORK/nginx"' EXIT
NGINX_TLS_CERT=$WORK/tls/server.pem NGINX_TLS_KEY=$WORK/tls/server.key start_nginx "$WORK/nginx" "$WORK/www" "$RATE"
URL=https://127.0.0.1:$PORT/f.bin

command_for() {
    local out=$WORK/out/f.bin state=$WORK/out/state
    case "$1" in
        curl-h2) echo "curl -s --http2 --cacert $CA -o $out $URL" ;;
        curl-h1) echo "curl -s --http1.1 --cacert $CA -o $out $URL" ;;
        haul-x1) echo "$HAUL get -q -x 1 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
        haul-x1-h2) echo "$HAUL get -q -x 1 --http2 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
        haul-x4) echo "$HAUL get -q -x 4 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
        haul-x4-streams) echo "$HAUL_STREAMS get -q -x 4 --ca-certificate $CA -o $out --state-dir $state $URL" ;;
        aria2c-x4) echo "aria2c -q -x4 -s4 --min-split-size=1M --file-allocation=none --ca-certificate=$CA -d $WORK/out -o f.bin $URL" ;;
    esac
}
TOOLS=(curl-h2 curl-h1 haul-x1 haul-x1-h2 haul-x4 aria2c-x4)
[[ -n "${HAUL_STREAMS:-}" ]] && TOOLS+=(haul-x4-streams)
echo "== $0 $*: $SIZE_MIB MiB over HTTPS (HTTP/2 offered), nginx limit_rate ${RATE:-none}, $ROUNDS rounds, order rotated"
for tool in "${TOOLS[@]}"; do echo "  $tool: $(command_for "$tool")"; done
declare -A WALLS CPUS
FAILED=0
for ((round = 0; round < ROUNDS; round++)); do
    for ((i = 0; i < ${#TOOLS[@]}; i++)); do
        tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
        rm -rf "$WORK/out"; mkdir -p "$WORK/out"; sync
        /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.txt" $(command_for "$tool") || true
        read -r wall user sys rss < <(tail -n 1 "$WORK/time.txt")
        sha=$(sha256sum < "$WORK/out/f.bin" 2>/dev/null | cut -d' ' -f1 || true)
        verdict=ok; [[ "$sha" == "$SRC_SHA" ]] || { verdict="FAILED: $(head -n 1 "$WORK/time.txt" | grep -v "^[0-9]" || echo "wrong bytes")"; FAILED=1; }
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
        printf 'round %d %-15s wall %7.2f s  cpu %5.2f s  rss %4d MiB  %s\n' $((round + 1)) "$tool" "$wall" "$cpu" $((rss / 1024)) "$verdict"
        [[ $verdict == ok ]] && { WALLS[$tool]+="$wall "; CPUS[$tool]+="$cpu "; }
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
for tool in "${TOOLS[@]}"; do
    printf '%-15s median wall %7.2f s  cpu %5.2f s\n' "$tool" "$(median <<<"${WALLS[$tool]:-}")" "$(median <<<"${CPUS[$tool]:-}")"
done
exit $FAILED
