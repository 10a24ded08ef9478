#!/usr/bin/env bash
# Many small files from a private nginx on 127.0.0.1: `curl -Z`, `aria2c -j16` and `haul get -j16`,
# each fetching a whole job (COUNTxSIZE files) in one command, interleaved round by round. Prints
# median wall time, CPU time (user + system) and peak RSS per job and tool, the time per file, and
# checks every file of every run against a sha-256 manifest. With --https, over TLS with HTTP/2
# offered (a test CA made with openssl, once).
#
#   bench/many-files.sh [JOB...] [--rounds N] [--tools curl,aria2c,haul] [--haul PATH] [-j N] [--cap S] [--https]
#
# JOB         COUNTxSIZE, SIZE in bytes or with a K or M suffix (1024-based); default:
#             1000x100K 10000x1K 100000x1K
# --rounds N  rounds per job (default 3); the tool order rotates by one every round
# --tools     comma-separated subset of curl,aria2c,haul,haul-h2 (default: curl,aria2c,haul);
#             haul-h2 is `haul get --http2` (HTTP/2 offered; only differs from haul over HTTPS)
# --haul PATH run this haul binary (default: build it with scripts/build-release.sh and run
#             .build/release/haul)
# -j N        parallel downloads for every tool (default 16)
# --cap S     a run still going after S seconds is stopped (`timeout S`) and reported as
#             "did not finish"; that tool's later rounds of the same job are skipped (default 600)
# --https     nginx serves HTTPS (HTTP/2 offered by ALPN); every tool is given the test CA. curl
#             then multiplexes over HTTP/2 (its default over TLS), aria2c and haul speak HTTP/1.1
# See bench/README.md for what is measured and the caveats.
set -euo pipefail

usage() { sed -n '2,/^# See/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

ROUNDS=3 JOBS=16 CAP=600 HAUL= TOOLS_ARG=curl,aria2c,haul HTTPS=
SPECS=()
while (( $# )); do
    case "$1" in
        --rounds) ROUNDS=${2:-}; shift 2 ;;
        --tools) TOOLS_ARG=${2:-}; shift 2 ;;
        --haul) HAUL=${2:-}; shift 2 ;;
        -j) JOBS=${2:-}; shift 2 ;;
        --cap) CAP=${2:-}; shift 2 ;;
        --https) HTTPS=1; shift ;;
        -h|--help) usage ;;
        [0-9]*x[0-9]*) SPECS+=("$1"); shift ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
for n in "$ROUNDS" "$JOBS" "$CAP"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error: '$n' is not a positive number" >&2; exit 2; }; done
(( ${#SPECS[@]} )) || SPECS=(1000x100K 10000x1K 100000x1K)
IFS=, read -r -a TOOLS <<<"$TOOLS_ARG"
for tool in "${TOOLS[@]}"; do
    [[ "$tool" =~ ^(curl|aria2c|haul|haul-h2)$ ]] || { echo "error: unknown tool '$tool' (curl, aria2c, haul, haul-h2)" >&2; exit 2; }
done
(( ${#TOOLS[@]} )) || { echo "error: no tools" >&2; exit 2; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-many
RUN=$WORK/run.$$
source "$REPO/bench/nginx.sh"
source "$REPO/bench/many-files-lib.sh"
source "$REPO/bench/tls.sh"
for spec in "${SPECS[@]}"; do parse_spec "$spec" >/dev/null; done

has() { [[ " ${TOOLS[*]} " == *" $1 "* ]]; }
HAUL_WANTED=; { has haul || has haul-h2; } && HAUL_WANTED=1
missing=()
[[ -n "$NGINX" ]] || missing+=(nginx)
[[ -x /usr/bin/time ]] || missing+=(time)
command -v curl >/dev/null || missing+=(curl)   # also used to see that nginx is up
has aria2c && ! command -v aria2c >/dev/null && missing+=(aria2)
command -v timeout >/dev/null && command -v sha256sum >/dev/null && command -v split >/dev/null || missing+=(coreutils)
(( ${#missing[@]} )) && { echo "error: missing tools; install them: apt-get install -y ${missing[*]}" >&2; exit 2; }

if [[ -n "$HAUL_WANTED" ]]; then
    if [[ -z "$HAUL" ]]; then
        # Build first: a failed build should stop us before minutes of downloading.
        "$REPO/scripts/build-release.sh" || { echo "error: haul did not build" >&2; exit 2; }
        HAUL=$REPO/.build/release/haul
    fi
    HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")
    [[ -x "$HAUL" ]] || { echo "error: $HAUL is not an executable" >&2; exit 2; }
fi

cleanup() {
    set +e   # clean up everything even if a step fails
    stop_timed
    stop_nginx
    rm -rf "$RUN"   # the generated files stay under $WORK/www for the next run
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for spec in "${SPECS[@]}"; do read -r count size < <(parse_spec "$spec"); make_job "$spec" "$count" "$size"; done

mkdir -p "$RUN"
SCHEME=http CA_CURL= CA_ARIA2= CA_HAUL=
if [[ -n "$HTTPS" ]]; then
    make_bench_tls "$WORK/tls"
    SCHEME=https CA_CURL="--cacert $BENCH_CA" CA_ARIA2="--ca-certificate=$BENCH_CA" CA_HAUL="--ca-certificate $BENCH_CA"
    export NGINX_TLS_CERT=$BENCH_CERT NGINX_TLS_KEY=$BENCH_KEY
fi
NGINX_WORKER_CONNECTIONS=4096 start_nginx "$RUN/nginx" "$WORK/www" || exit 2

# The URL list (aria2's input-file format: a URL a line, for aria2c and haul) and curl's config
# file (a url/output pair per file) of one job, made once per invocation since the port changes.
make_lists() {
    local spec=$1 base=$SCHEME://127.0.0.1:$PORT/$1
    manifest_names "$spec" | awk -v b="$base" '{ print b "/" $0 }' > "$RUN/$spec.urls"
    manifest_names "$spec" |
        awk -v b="$base" -v o="$RUN/out" '{ printf "url = \"%s/%s\"\noutput = \"%s/%s\"\n", b, $0, o, $0 }' > "$RUN/$spec.curl"
}

command_for() {   # TOOL SPEC
    local out=$RUN/out list=$RUN/$2.urls
    case "$1" in
        curl) echo "curl -s -S --no-progress-meter --fail -Z --parallel-max $JOBS $CA_CURL -K $RUN/$2.curl" ;;
        aria2c) echo "aria2c -q -j$JOBS -i $list --deferred-input=true --file-allocation=none $CA_ARIA2 -d $out" ;;
        haul) echo "$HAUL get -j $JOBS -q -i $list -d $out $CA_HAUL --state-dir $RUN/state" ;;
        haul-h2) echo "$HAUL get -j $JOBS -q --http2 -i $list -d $out $CA_HAUL --state-dir $RUN/state" ;;
    esac
}

echo "== $0 ${*:-}"
echo "machine: $(nproc) cores, $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -m | awk '/^Mem:/ {print $2}') MiB"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "versions: $("$NGINX" -v 2>&1) | $(curl --version | head -n1 | cut -d' ' -f1-2)$(has aria2c && echo " | $(aria2c --version | head -n1)")"
[[ -n "$HAUL_WANTED" ]] && echo "haul: $HAUL ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit'))"
echo "nginx: $SCHEME://127.0.0.1:$PORT, one process, sendfile, worker_connections 4096, no access log$([[ -n "$HTTPS" ]] && echo ", TLS with HTTP/2 offered, test CA $BENCH_CA")"
echo "jobs: ${SPECS[*]}; rounds: $ROUNDS, tool order rotated each round; cap per run: ${CAP} s"
echo "timed with: /usr/bin/time -f '%e %U %S %M' timeout $CAP COMMAND; between runs: rm -rf OUT STATE; sync"
echo

FAILED=0
declare -A RESULTS DNF
for spec in "${SPECS[@]}"; do
    read -r count size < <(parse_spec "$spec")
    make_lists "$spec"
    echo "-- $spec: $count files of $size bytes"
    for tool in "${TOOLS[@]}"; do echo "   $tool: $(command_for "$tool" "$spec")"; done
    find "$WORK/www/$spec" -type f -print0 | xargs -0 cat > /dev/null   # the source in the page cache
    for ((round = 0; round < ROUNDS; round++)); do
        for ((i = 0; i < ${#TOOLS[@]}; i++)); do
            tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
            key="$spec $tool"
            if [[ -n "${DNF[$key]:-}" ]]; then
                echo "round $((round + 1)) $spec $tool: skipped (did not finish in $CAP s before)"; continue
            fi
            rm -rf "$RUN/out" "$RUN/state" "$RUN/time.txt"; mkdir -p "$RUN/out"; sync
            status=0
            # shellcheck disable=SC2046  # the command is word-split on purpose (no spaces in paths)
            run_timed "$RUN/time.txt" "$RUN/tool.log" "$CAP" $(command_for "$tool" "$spec") || status=$?
            read -r wall user sys rss < <(tail -n 1 "$RUN/time.txt") || { wall=0 user=0 sys=0 rss=0; }
            [[ "$wall" =~ ^[0-9.]+$ ]] || { wall=0 user=0 sys=0 rss=0; }
            cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
            if (( status == 124 || status == 137 )); then
                DNF[$key]=1
                verdict="did not finish in $CAP s"
            else
                verdict=$(verify_tree "$RUN/out" "$spec" "$count")
                (( status != 0 )) && verdict="exit status $status; $verdict"
            fi
            per=$(awk -v w="$wall" -v n="$count" 'BEGIN { printf "%.0f", w / n * 1e6 }')
            printf 'round %d %-10s %-7s wall %8.2f s  cpu %7.2f s  rss %6.1f MiB  %6s us/file  %s\n' \
                $((round + 1)) "$spec" "$tool" "$wall" "$cpu" "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" "$per" "$verdict"
            if [[ -s "$RUN/tool.log" ]]; then
                echo "   $tool said ($(wc -l < "$RUN/tool.log") lines, first 5):"; head -n 5 "$RUN/tool.log" | sed 's/^/     /'
            fi
            if [[ "$verdict" == ok* && $status == 0 ]]; then
                RESULTS[$key]+="$wall $cpu $rss"$'\n'
            elif [[ -z "${DNF[$key]:-}" ]]; then
                FAILED=1
                echo "!!!!!! $spec $tool round $((round + 1)): $verdict" >&2
            fi
        done
    done
    echo
done

# Median of column $1 of the successful runs of one tool.
median() { awk -v c="$1" 'NF { print $c }' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| job | tool | runs ok | wall s (median) | CPU s (median) | peak RSS MiB (median) | µs per file (wall / N) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for spec in "${SPECS[@]}"; do
    read -r count size < <(parse_spec "$spec")
    for tool in "${TOOLS[@]}"; do
        key="$spec $tool" runs=${RESULTS["$spec $tool"]:-}
        ok=$(grep -c . <<<"$runs" || true)
        if (( ok == 0 )); then
            why="failed"; [[ -n "${DNF[$key]:-}" ]] && why="did not finish in $CAP s"
            echo "| $spec | $tool | 0 | $why | | | |"
            continue
        fi
        wall=$(median 1 <<<"$runs")
        awk -v j="$spec" -v t="$tool" -v k="$ok" -v w="$wall" -v c="$(median 2 <<<"$runs")" \
            -v r="$(median 3 <<<"$runs")" -v n="$count" -v d="${DNF[$key]:+ (a later round did not finish)}" \
            'BEGIN { printf "| %s | %s | %d%s | %.2f | %.2f | %.1f | %.0f |\n", j, t, k, d, w, c, r / 1024, w / n * 1e6 }'
    done
done
(( FAILED )) && { echo "!!!!!! at least one run downloaded wrong, missing or extra files: see above" >&2; exit 1; }
exit 0
