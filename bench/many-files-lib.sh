# Sourced by bench/many-files.sh and bench/many-files-kill.sh: the jobs of many small files.
# Needs WORK set (the folder the files are made in, ${TMPDIR:-/tmp}/haul-bench-many).

# "1000x100K" -> "1000 102400" (SIZE in bytes, or with a K or M suffix, 1024-based)
parse_spec() {
    [[ "$1" =~ ^([1-9][0-9]*)x([1-9][0-9]*)([KkMm]?)$ ]] || { echo "error: bad job '$1' (COUNTxSIZE, e.g. 1000x100K)" >&2; exit 2; }
    local size=${BASH_REMATCH[2]}
    case "${BASH_REMATCH[3]}" in [Kk]) size=$((size << 10)) ;; [Mm]) size=$((size << 20)) ;; esac
    echo "${BASH_REMATCH[1]} $size"
}

# make_job SPEC COUNT SIZE: makes WORK/www/SPEC/f000000.bin ... (random bytes) and its manifest
# WORK/manifests/SPEC.sha256 ("HASH  NAME" lines, sorted by name), once; later runs reuse them.
make_job() {
    local spec=$1 count=$2 size=$3 dir=$WORK/www/$1 manifest=$WORK/manifests/$1.sha256
    [[ -s "$manifest" && "$(wc -l < "$manifest")" == "$count" && -d "$dir" ]] && return 0
    echo "making $dir: $count files of $size bytes, once..."
    rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp" "$WORK/manifests"
    head -c $((count * size)) /dev/urandom | split -b "$size" -a 6 -d --additional-suffix=.bin - "$dir.tmp/f"
    (cd "$dir.tmp" && find . -maxdepth 1 -type f -name 'f*.bin' -printf '%P\0' | sort -z | xargs -0 sha256sum) > "$manifest.tmp"
    [[ "$(wc -l < "$manifest.tmp")" == "$count" ]] || { echo "error: made $(wc -l < "$manifest.tmp") files for $spec" >&2; exit 2; }
    mv "$dir.tmp" "$dir" && mv "$manifest.tmp" "$manifest"
}

# manifest_names SPEC: the file names of a job, one a line, sorted.
manifest_names() { cut -c67- "$WORK/manifests/$1.sha256"; }

# verify_tree OUT SPEC COUNT: checks that OUT holds every file of the job, byte-identical, and
# nothing else (no .part, .aria2 or other leftovers). Prints one line starting with "ok" or "FAILED".
verify_tree() {
    local out=$1 spec=$2 count=$3 manifest=$WORK/manifests/$2.sha256 present extra absent bad=0
    present=$( (cd "$out" 2>/dev/null && find . -type f -printf '%P\n') | sort)
    extra=$(comm -13 <(manifest_names "$spec") <(printf '%s\n' "$present" | sed '/^$/d'))
    absent=$(comm -23 <(manifest_names "$spec") <(printf '%s\n' "$present" | sed '/^$/d') | wc -l)
    if (( absent < count )); then
        # Absent files show as "FAILED open or read" (counted above), wrong bytes as "FAILED".
        bad=$( (cd "$out" && sha256sum -c --quiet "$manifest" 2>/dev/null) | grep -c ': FAILED$' || true)
    fi
    if [[ -z "$extra" && $absent == 0 && $bad == 0 ]]; then echo "ok ($count files byte-identical, no leftovers)"; return; fi
    local msg="FAILED:"
    (( absent )) && msg+=" $absent missing;"
    (( bad )) && msg+=" $bad with wrong bytes;"
    [[ -n "$extra" ]] && msg+=" $(wc -l <<<"$extra") leftovers ($(head -n 3 <<<"$extra" | tr '\n' ' ')...);"
    echo "$msg"
}

# run_timed TIMEFILE LOGFILE CAP COMMAND...: runs COMMAND as `/usr/bin/time -f '%e %U %S %M'
# -o TIMEFILE timeout -k 10 CAP COMMAND`, output to LOGFILE, and returns its exit status (124 or
# 137: stopped at the cap). It runs in the background and is waited for, so that a signal to the
# script is handled at once; the script's exit trap calls stop_timed to stop it.
TIMED_PID=
run_timed() {
    local timefile=$1 logfile=$2 cap=$3 status=0
    shift 3
    /usr/bin/time -f '%e %U %S %M' -o "$timefile" timeout -k 10 "$cap" "$@" > "$logfile" 2>&1 &
    TIMED_PID=$!
    wait "$TIMED_PID" || status=$?
    TIMED_PID=
    return "$status"
}
stop_timed() {
    [[ -n "$TIMED_PID" ]] || return 0
    # timeout runs in a process group of its own, out of reach of a Ctrl-C: TERM it (it passes the
    # signal on to the command and exits), then time exits too.
    local child
    for child in $(cat /proc/"$TIMED_PID"/task/*/children 2>/dev/null); do kill -TERM "$child" 2>/dev/null; done
    wait "$TIMED_PID" 2>/dev/null
    TIMED_PID=
}
