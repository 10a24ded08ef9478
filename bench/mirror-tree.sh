#!/usr/bin/env bash
# A folder tree from a private nginx autoindex on 127.0.0.1: `wget -m -np`, `lftp mirror
# --parallel=N`, `rclone copy` (http backend, when installed) and `haul mirror`, each a first copy
# into an empty folder, a resync with nothing changed, and a resync after four changes to the
# served tree (a file rewritten with the same size and another time in the same minute, a file
# whose size changed, a new file in a new folder, a removed file), which deletes what is gone
# where the tool can (`lftp --delete`, `rclone sync`, `haul --delete`; wget cannot). Prints wall
# and CPU time per run, checks every copy with `diff -r` against the served tree, and counts the
# requests and body bytes nginx served for each pass. The unchanged resync is run --rounds times,
# the tools taking turns (each round in another order), and each tool's median is printed.
#
#   bench/mirror-tree.sh [--folders N] [--files N] [--tools wget,lftp,rclone,haul] [--haul PATH] [-j N] [--rounds N]
#
# --folders N  folders of the tree (default 200), each with --files N files (default 25) of
#              512 B to 8 KiB, plus a folder of names with spaces, accents, `%` and CJK
# --tools      comma-separated subset of wget,lftp,rclone,haul (default: those installed)
# --haul PATH  run this haul binary (default: build it with scripts/build-release.sh and run
#              .build/release/haul)
# -j N         parallel transfers for lftp, rclone and haul (default 16)
# --rounds N   unchanged resyncs of each tool (default 1); wall times in milliseconds
# Loopback only. See bench/README.md for what is measured and the caveats.
set -euo pipefail
shopt -s extglob

usage() { sed -n '2,/^# Loopback/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

FOLDERS=200 FILES=25 JOBS=16 HAUL= TOOLS_ARG= ROUNDS=1
while (( $# )); do
    case "$1" in
        --folders) FOLDERS=${2:-}; shift 2 ;;
        --files) FILES=${2:-}; shift 2 ;;
        --tools) TOOLS_ARG=${2:-}; shift 2 ;;
        --haul) HAUL=${2:-}; shift 2 ;;
        -j) JOBS=${2:-}; shift 2 ;;
        --rounds) ROUNDS=${2:-}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
for n in "$FOLDERS" "$FILES" "$JOBS" "$ROUNDS"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "error: '$n' is not a positive number" >&2; exit 2; }; done
if [[ -z "$TOOLS_ARG" ]]; then
    TOOLS=()
    for tool in wget lftp rclone; do command -v "$tool" >/dev/null && TOOLS+=("$tool"); done
    TOOLS+=(haul)
else
    IFS=, read -r -a TOOLS <<<"$TOOLS_ARG"
fi
for tool in "${TOOLS[@]}"; do
    [[ "$tool" =~ ^(wget|lftp|rclone|haul)$ ]] || { echo "error: unknown tool '$tool' (wget, lftp, rclone, haul)" >&2; exit 2; }
    [[ "$tool" == haul ]] || command -v "$tool" >/dev/null || { echo "error: $tool is not installed (apt-get install -y $tool)" >&2; exit 2; }
done

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${TMPDIR:-/tmp}/haul-bench-mirror
RUN=$WORK/run.$$
source "$REPO/bench/nginx.sh"
[[ -n "$NGINX" ]] || { echo "error: nginx is not installed" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "error: GNU time is not installed (apt-get install -y time)" >&2; exit 2; }

if [[ " ${TOOLS[*]} " == *" haul "* ]]; then
    if [[ -z "$HAUL" ]]; then
        "$REPO/scripts/build-release.sh" || { echo "error: haul did not build" >&2; exit 2; }
        HAUL=$REPO/.build/release/haul
    fi
    HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")
fi

cleanup() {
    set +e
    [[ -d "$RUN/keep" && ! -f "$TREE/.done" ]] && restore_tree
    stop_nginx
    rm -rf "$RUN"   # the tree stays under $WORK/www for the next run
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The tree, made once per shape (deterministic sizes; the bytes are random).
TREE=$WORK/www/tree-${FOLDERS}x${FILES}
if [[ ! -f "$TREE/.done" ]]; then
    rm -rf "$TREE"
    mkdir -p "$TREE"
    for ((d = 0; d < FOLDERS; d++)); do
        mkdir -p "$TREE/d$d"
        for ((f = 0; f < FILES; f++)); do
            head -c $(( 512 + (d * 7919 + f * 104729) % 7681 )) /dev/urandom > "$TREE/d$d/f$f.bin"
        done
    done
    mkdir -p "$TREE/names with spaces"
    for name in "a b.txt" "café crème.txt" "100% sure.txt" "日本語のファイル.txt" "naïve & done.bin"; do
        head -c 1000 /dev/urandom > "$TREE/names with spaces/$name"
    done
    touch "$TREE/.done"
fi
COUNT=$(find "$TREE" -type f ! -name '.done' | wc -l)

mkdir -p "$RUN"
NGINX_SERVER_EXTRA="location /tree/ { alias \"$TREE/\"; autoindex on; }" NGINX_WORKER_CONNECTIONS=1024 \
    NGINX_ACCESS_LOG_FORMAT='$request_method $status $body_bytes_sent' start_nginx "$RUN/nginx" "$WORK/www" || exit 2
URL=http://127.0.0.1:$PORT/tree/

command_for() {   # TOOL [PASS]: with PASS "changed", the command that also deletes what is gone
    local out=$RUN/out/$1 changed=${2:-}
    case "$1" in
        # -nH --cut-dirs=1: the tree at OUT's top; the listings are fetched to be read, then removed.
        wget) echo "wget -q -m -np -nH --cut-dirs=1 -e robots=off --reject index.html* -P $out $URL" ;;
        lftp) echo "lftp -c mirror ${changed:+--delete }--parallel=$JOBS $URL $out" ;;
        rclone) echo "rclone $([[ -n "$changed" ]] && echo sync || echo copy) -q --transfers $JOBS --checkers $JOBS --http-url $URL :http: $out" ;;
        haul) echo "$HAUL mirror -q ${changed:+--delete }-j $JOBS $URL $out --state-dir $RUN/state" ;;
    esac
}

# The four changes, and putting the tree back as it was (with its times) for the next tool. The
# tree's .done goes while it is changed: a run cut short makes it again.
KEEP=$RUN/keep
change_tree() {
    rm -f "$TREE/.done"
    mkdir -p "$KEEP"
    cp -p "$TREE/d3/f4.bin" "$KEEP/rewritten"; cp -p "$TREE/d5/f6.bin" "$KEEP/resized"; cp -p "$TREE/d7/f8.bin" "$KEEP/removed"
    local size mtime
    size=$(stat -c %s "$TREE/d3/f4.bin"); mtime=$(stat -c %Y "$TREE/d3/f4.bin")
    head -c "$size" /dev/urandom > "$TREE/d3/f4.bin"
    touch -d "@$(( mtime - mtime % 60 + (mtime % 60 + 17) % 60 ))" "$TREE/d3/f4.bin"
    head -c 12345 /dev/urandom > "$TREE/d5/f6.bin"
    mkdir -p "$TREE/new folder"; head -c 3000 /dev/urandom > "$TREE/new folder/fresh.bin"
    rm "$TREE/d7/f8.bin"
}
restore_tree() {
    cp -p "$KEEP/rewritten" "$TREE/d3/f4.bin"; cp -p "$KEEP/resized" "$TREE/d5/f6.bin"; cp -p "$KEEP/removed" "$TREE/d7/f8.bin"
    rm -rf "$TREE/new folder"
    touch "$TREE/.done"
}

echo "== $0 ${*:-}"
echo "machine: $(nproc) cores, $(uname -srm), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree: $COUNT files ($FOLDERS folders of $FILES files of 512 B to 8 KiB, and 5 odd names) from nginx autoindex at $URL"
[[ " ${TOOLS[*]} " == *" haul "* ]] && echo "haul: $HAUL ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit'))"
for tool in "${TOOLS[@]}"; do echo "   $tool: $(command_for "$tool")"; done
echo

FAILED=0
# One pass of TOOL: PASS is first, resync or changed (the tree already changed). Prints a line and
# sets WALL_MS.
run_pass() {
    local tool=$1 pass=$2 status=0 logged served verdict start wall user sys
    logged=$(wc -l < "$RUN/nginx/access.log" 2>/dev/null || echo 0)
    start=$EPOCHREALTIME
    # shellcheck disable=SC2046  # split on purpose: no spaces in the command's paths
    /usr/bin/time -f '%U %S' -o "$RUN/time.txt" $(command_for "$tool" "${pass/#@(first|resync)/}") > "$RUN/tool.log" 2>&1 || status=$?
    WALL_MS=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
    # Its last line: a tool killed by a signal has one before it saying so.
    read -r user sys < <(tail -n 1 "$RUN/time.txt") || true
    # What nginx served this pass: requests, and file bodies (200s with bytes, listings too).
    served=$(tail -n +$(( logged + 1 )) "$RUN/nginx/access.log" | awk '{ n++; if ($1 != "HEAD") b += $3 } END { printf "%d requests, %d KiB of bodies", n, b / 1024 }')
    # The wget copy also holds nothing but the tree once its listings are gone.
    if diff -r -x .done "$TREE" "$RUN/out/$tool" > "$RUN/diff.txt" 2>&1; then verdict=ok; else verdict="DIFFERS ($(wc -l < "$RUN/diff.txt") lines of diff -r: $(head -c 300 "$RUN/diff.txt" | tr '\n' ' '))"; [[ "$pass" == changed && "$tool" != haul ]] || FAILED=1; fi
    (( status != 0 )) && { verdict="exit status $status; $verdict"; FAILED=1; }
    printf '%-7s %-8s wall %7.1f ms  cpu %6.2f s  %s; %s\n' "$tool" "$pass" "$WALL_MS" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$served" "$verdict"
    [[ -s "$RUN/tool.log" ]] && head -n 3 "$RUN/tool.log" | sed 's/^/     /'
    return 0
}

rm -rf "$RUN/out" "$RUN/state"; mkdir -p "$RUN/out"; sync
for tool in "${TOOLS[@]}"; do run_pass "$tool" first; done
declare -A RESYNCS=()
for ((round = 0; round < ROUNDS; round++)); do
    for ((i = 0; i < ${#TOOLS[@]}; i++)); do
        tool=${TOOLS[(i + round) % ${#TOOLS[@]}]}
        run_pass "$tool" resync
        RESYNCS[$tool]+="$WALL_MS "
    done
done
for tool in "${TOOLS[@]}"; do
    change_tree
    run_pass "$tool" changed
    restore_tree
done
echo
for tool in "${TOOLS[@]}"; do
    # shellcheck disable=SC2086  # the list of times, split on purpose
    printf '%-7s resync, nothing changed: median %.1f ms of %d (min %.1f, max %.1f)\n' "$tool" \
        $(printf '%s\n' ${RESYNCS[$tool]} | sort -n | awk '{ t[NR] = $1 } END { m = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2; print m, NR, t[1], t[NR] }')
done
exit $FAILED
