#!/usr/bin/env bash
# kill -9 in the middle of a many-file run, then the same command again: are all files correct,
# and did the server send a body again for a file that was already at its final name?
#
#   bench/many-files-kill.sh [JOB] [--haul PATH] [-j N] [--kill-at N] [--cap S]
#
# JOB          COUNTxSIZE as in bench/many-files.sh (default 10000x1K); the files are shared with
#              it under ${TMPDIR:-/tmp}/haul-bench-many/
# --haul PATH  run this haul binary (default: build it with scripts/build-release.sh and run
#              .build/release/haul)
# -j N         parallel downloads (default 16)
# --kill-at N  kill -9 once N files are at their final names (default: half of COUNT)
# --cap S      give up on a run after S seconds (default 900)
#
# Runs `haul get -j N -i LIST -d OUT --state-dir STATE` against a private nginx on 127.0.0.1 that
# logs `$request_method $request_uri $status $body_bytes_sent "$http_range"` per request, counts
# the files at their final names every 50 ms, kill -9s haul at --kill-at, runs the same command
# again to the end, and reports from the access log. Exit status 0 when every file is correct and
# at most 2 x j files that were final before the kill had a body sent again; 1 otherwise.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

SPEC=10000x1K JOBS=16 KILL_AT= CAP=900 HAUL=
while (( $# )); do
    case "$1" in
        --haul) HAUL=${2:-}; shift 2 ;;
        -j) JOBS=${2:-}; shift 2 ;;
        --kill-at) KILL_AT=${2:-}; shift 2 ;;
        --cap) CAP=${2:-}; shift 2 ;;
        -h|--help) usage ;;
        [0-9]*x[0-9]*) SPEC=$1; shift ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
for n in "$JOBS" "$CAP" ${KILL_AT:+"$KILL_AT"}; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error: '$n' is not a positive number" >&2; exit 2; }; done

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-many
RUN=$WORK/kill.$$
source "$REPO/bench/nginx.sh"
source "$REPO/bench/many-files-lib.sh"
read -r COUNT SIZE < <(parse_spec "$SPEC")
[[ -n "$COUNT" ]] || exit 2
KILL_AT=${KILL_AT:-$((COUNT / 2))}
(( KILL_AT < COUNT )) || { echo "error: --kill-at must be below the file count $COUNT" >&2; exit 2; }

missing=()
[[ -n "$NGINX" ]] || missing+=(nginx)
[[ -x /usr/bin/time ]] || missing+=(time)
command -v curl >/dev/null || missing+=(curl)
command -v timeout >/dev/null && command -v sha256sum >/dev/null && command -v split >/dev/null || missing+=(coreutils)
(( ${#missing[@]} )) && { echo "error: missing tools; install them: apt-get install -y ${missing[*]}" >&2; exit 2; }

if [[ -z "$HAUL" ]]; then
    "$REPO/scripts/build-release.sh" || { echo "error: haul did not build" >&2; exit 2; }
    HAUL=$REPO/.build/release/haul
fi
HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")
[[ -x "$HAUL" ]] || { echo "error: $HAUL is not an executable" >&2; exit 2; }

HAUL_PID=
cleanup() {
    set +e   # clean up everything even if a step fails
    if [[ -n "$HAUL_PID" ]]; then kill -9 "$HAUL_PID" 2>/dev/null; wait "$HAUL_PID" 2>/dev/null; fi
    stop_timed
    stop_nginx
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

make_job "$SPEC" "$COUNT" "$SIZE"
mkdir -p "$RUN/out"
NGINX_WORKER_CONNECTIONS=4096 NGINX_ACCESS_LOG_FORMAT='$request_method $request_uri $status $body_bytes_sent "$http_range"' \
    start_nginx "$RUN/nginx" "$WORK/www" || exit 2
LOG=$RUN/nginx/access.log
manifest_names "$SPEC" | awk -v b="http://127.0.0.1:$PORT/$SPEC" '{ print b "/" $0 }' > "$RUN/list"
COMMAND=("$HAUL" get -j "$JOBS" -i "$RUN/list" -d "$RUN/out" --state-dir "$RUN/state")
final_count() { find "$RUN/out" -maxdepth 1 -type f -name 'f*.bin' | wc -l; }
# Waits (at most 5 s) until nginx's access log has not grown for 0.3 s, then prints its line count.
settled_log_lines() {
    local last=-1 size stable=0
    for _ in $(seq 50); do
        size=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
        if [[ "$size" == "$last" ]]; then (( ++stable >= 3 )) && break; else stable=0; fi
        last=$size; sleep 0.1
    done
    wc -l < "$LOG"
}

echo "== $0 ${*:-}"
echo "machine: $(nproc) cores, $(uname -srm); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "haul: $HAUL ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit'))"
echo "job: $COUNT files of $SIZE bytes from nginx on 127.0.0.1:$PORT; kill -9 once $KILL_AT are at their final names"
echo "command (both runs): ${COMMAND[*]}"
echo

# Run 1, killed midway.
start=$(date +%s.%N)
"${COMMAND[@]}" > "$RUN/run1.log" 2>&1 &
HAUL_PID=$!
deadline=$((SECONDS + CAP))
seen=0
while kill -0 "$HAUL_PID" 2>/dev/null && (( SECONDS < deadline )); do
    seen=$(final_count)
    (( seen >= KILL_AT )) && break
    sleep 0.05
done
kill -9 "$HAUL_PID" 2>/dev/null || true
status1=0; wait "$HAUL_PID" 2>/dev/null || status1=$?
HAUL_PID=
elapsed1=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
if (( status1 != 137 )); then
    echo "error: run 1 ended by itself (exit status $status1) after $elapsed1 s with $(final_count) files, before the kill at $KILL_AT" >&2
    tail -n 5 "$RUN/run1.log" >&2
    exit 2
fi
(( seen >= KILL_AT )) || { echo "error: only $seen files in $CAP s; no kill point reached" >&2; exit 2; }
find "$RUN/out" -maxdepth 1 -type f -name 'f*.bin' -printf '%f\n' | sort > "$RUN/before"
BEFORE=$(wc -l < "$RUN/before")
PARTS=$(find "$RUN/out" -maxdepth 1 -type f -name '*.part' | wc -l)
OTHERS=$(find "$RUN/out" -mindepth 1 ! -name 'f*.bin' ! -name '*.part' | wc -l)
awk 'NR == FNR { keep[$1]; next } substr($0, 67) in keep' "$RUN/before" "$WORK/manifests/$SPEC.sha256" > "$RUN/before.sha256"
WRONG_BEFORE=$( (cd "$RUN/out" && sha256sum -c --quiet "$RUN/before.sha256" 2>/dev/null) | grep -c ': FAILED' || true)
LINES1=$(settled_log_lines)
echo "run 1: kill -9 after $elapsed1 s: $BEFORE files at their final names ($WRONG_BEFORE of them with wrong bytes), $PARTS .part files, $OTHERS other entries; $LINES1 requests logged"

# Run 2: the same command, to the end.
status2=0
run_timed "$RUN/time2" "$RUN/run2.log" "$CAP" "${COMMAND[@]}" || status2=$?
read -r wall2 user2 sys2 rss2 < <(tail -n 1 "$RUN/time2") || { wall2=0 user2=0 sys2=0 rss2=0; }
LINES2=$(settled_log_lines)
VERDICT=$(verify_tree "$RUN/out" "$SPEC" "$COUNT")
echo "run 2: exit status $status2, wall $wall2 s, cpu $(awk -v u="$user2" -v s="$sys2" 'BEGIN { print u + s }') s, peak RSS $((rss2 / 1024)) MiB; $((LINES2 - LINES1)) requests logged"
echo "run 2 said: $(grep -c '^haul: ' "$RUN/run2.log" || true) error lines; last line: $(tail -n 1 "$RUN/run2.log")"
grep '^haul: ' "$RUN/run2.log" | head -n 5 | sed 's/^/    /' || true
echo "files: $VERDICT"

# The access log of run 2: METHOD URI STATUS BODY_BYTES "RANGE".
tail -n +$((LINES1 + 1)) "$LOG" > "$RUN/log2"
# A file's body is a 200 or 206 with body_bytes_sent > 0; other answers with a body (nginx's error
# page of a 416, say) are counted apart.
read -r RESENT RESENT_BYTES OTHER_BODIES < <(awk 'NR == FNR { before[$1]; next }
    { n = split($2, p, "/"); if (p[n] in before && $4 > 0) { if ($3 == 200 || $3 == 206) { files[p[n]]; bytes += $4 } else other++ } }
    END { printf "%d %d %d\n", length(files), bytes, other }' "$RUN/before" "$RUN/log2")
echo
echo "run 2 answers with a body other than 200/206 for files final before the kill: $OTHER_BODIES"
echo "run 2 requests by method and status:"
awk '{ print "    " $1, $3 }' "$RUN/log2" | sort | uniq -c | sort -rn
awk -v size="$SIZE" -v missing=$((COUNT - BEFORE)) 'NR == FNR { before[$1]; next }
    { n = split($2, p, "/"); if (!(p[n] in before)) { other += $4 }; if ($5 != "\"-\"") ranged++ }
    END { printf "run 2 body bytes for files not final before the kill: %d (those %d files hold %d); requests with Range: %d\n",
          other, missing, missing * size, ranged }' "$RUN/before" "$RUN/log2"
head -n "$LINES1" "$LOG" > "$RUN/log1"
echo "run 1 requests by method and status (the first HEAD is the script's check that nginx is up):"
awk '{ print "    " $1, $3 }' "$RUN/log1" | sort | uniq -c | sort -rn
awk '$4 > 0 { n = split($2, p, "/"); got[p[n]]++ } END { for (f in got) if (got[f] > 1) twice++; printf "run 1: %d files had a body sent more than once\n", twice }' "$RUN/log1"
echo
LIMIT=$((2 * JOBS))
echo "| files | -j | killed at | final before kill | wrong before kill | all files correct after rerun | final-before-kill files sent again (200/206, body > 0) | target |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
echo "| $COUNT × $SIZE B | $JOBS | $elapsed1 s | $BEFORE | $WRONG_BEFORE | $([[ "$VERDICT" == ok* && $status2 == 0 ]] && echo yes || echo "NO: exit $status2, $VERDICT") | $RESENT ($RESENT_BYTES bytes) | ≤ $LIMIT: $( (( RESENT <= LIMIT )) && echo met || echo MISSED) |"
[[ "$VERDICT" == ok* && $status2 == 0 && $WRONG_BEFORE == 0 ]] && (( RESENT <= LIMIT ))
