#!/usr/bin/env bash
# One small file, the commonest job of all: what a run costs from start to exit. A private nginx
# on 127.0.0.1 serves a file of SIZE bytes over HTTP and over HTTPS (a test CA, bench/tls.sh);
# hyperfine runs `haul get`, curl, wget and aria2c on each, RUNS runs apiece after 5 warm-ups,
# the output folder removed before every run (haul's state folder stays, as a user's does).
# Prints each tool's mean and standard deviation, user and system time.
#
#   bench/one-file.sh [--runs N] [--size BYTES]
#
# HAUL=PATH runs that haul instead of building one.
set -euo pipefail

usage() { sed -n '2,/^# HAUL=/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
RUNS=40 SIZE=1024
while (( $# )); do
    case "$1" in
        --runs) RUNS=${2:-}; shift 2 ;;
        --size) SIZE=${2:-}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
for n in "$RUNS" "$SIZE"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error: '$n' is not a positive number" >&2; exit 2; }; done

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-one
source "$REPO/bench/nginx.sh"
source "$REPO/bench/tls.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx not found; apt-get install -y nginx" >&2; exit 2; }
for tool in hyperfine curl wget aria2c; do
    command -v $tool >/dev/null || { echo "error: $tool not found; apt-get install -y ${tool/aria2c/aria2}" >&2; exit 2; }
done

HAUL=${HAUL:-}
if [[ -z "$HAUL" ]]; then
    "$REPO/scripts/build-release.sh" || { echo "error: haul did not build" >&2; exit 2; }
    HAUL=$REPO/.build/release/haul
fi
HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")

rm -rf "$WORK/www" "$WORK/out" "$WORK/state"
mkdir -p "$WORK/www"
head -c "$SIZE" /dev/urandom > "$WORK/www/f.bin"
make_bench_tls "$WORK/tls"
trap 'NGINX_PID=$PLAIN_PID stop_nginx; NGINX_PID=$TLS_PID stop_nginx' EXIT
start_nginx "$WORK/nginx-plain" "$WORK/www" || exit 2
PLAIN_PID=$NGINX_PID PLAIN_PORT=$PORT
NGINX_TLS_CERT=$BENCH_CERT NGINX_TLS_KEY=$BENCH_KEY start_nginx "$WORK/nginx-tls" "$WORK/www" || exit 2
TLS_PID=$NGINX_PID TLS_PORT=$PORT

echo "== $0 $*: $(nproc) cores, $(uname -sr); haul $("$HAUL" --version) at $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "versions: $(curl --version | head -n1 | cut -d' ' -f1-2) | $(wget --version | head -n1 | cut -d' ' -f1-3) | $(aria2c --version | head -n1)"
for scheme in http https; do
    port=$PLAIN_PORT ca_haul= ca_curl= ca_wget= ca_aria2=
    if [[ $scheme == https ]]; then
        port=$TLS_PORT ca_haul="--ca-certificate $BENCH_CA" ca_curl="--cacert $BENCH_CA"
        ca_wget="--ca-certificate=$BENCH_CA" ca_aria2="--ca-certificate=$BENCH_CA"
    fi
    url=$scheme://127.0.0.1:$port/f.bin
    echo
    echo "-- $url ($SIZE bytes)"
    hyperfine -N -w 5 -r "$RUNS" --prepare "rm -rf $WORK/out" \
        -n haul "$HAUL get -q $ca_haul -d $WORK/out --state-dir $WORK/state $url" \
        -n curl "curl -sS -f $ca_curl --create-dirs -o $WORK/out/f.bin $url" \
        -n wget "wget -q $ca_wget -P $WORK/out $url" \
        -n aria2c "aria2c -q $ca_aria2 --file-allocation=none -d $WORK/out $url" 2>&1 |
        grep -E '^Benchmark|Time \(mean' | paste - - | sed -E 's/Benchmark [0-9]+: //; s/ +Time \(mean ± σ\): +/  /'
    cmp -s "$WORK/out/f.bin" "$WORK/www/f.bin" || { echo "!!!!!! the last run's file differs from the source" >&2; exit 1; }
done
