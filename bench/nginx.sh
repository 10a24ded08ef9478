# Sourced by the benchmarks: start_nginx DIR ROOT [LIMIT_RATE] starts a private nginx on a free
# 127.0.0.1 port (NGINX_ADDRESS: another loopback address, such as 127.0.0.2) serving ROOT (its config, pid, logs and temp files under DIR) and sets PORT
# and NGINX_PID; stop_nginx stops it. With LIMIT_RATE, every connection is held to that many
# bytes per second (nginx `limit_rate`), like a server that throttles each client connection.
# Optional settings, read from the environment when start_nginx runs:
#   NGINX_WORKER_CONNECTIONS  nginx's worker_connections (default 256); above 256 it also raises
#                             worker_rlimit_nofile to twice that
#   NGINX_ACCESS_LOG_FORMAT   an nginx log_format string: with it, every request is logged to
#                             DIR/access.log in that format (default: no access log)
#   NGINX_SERVER_EXTRA        more nginx directives for the server block (e.g. a location)
#   NGINX_TLS_CERT, NGINX_TLS_KEY
#                             PEM files: with both, nginx serves HTTPS with HTTP/2 offered by ALPN
#                             (`listen … ssl http2` before nginx 1.25.1, `http2 on` from it)

NGINX=$(command -v nginx || ls /usr/sbin/nginx /usr/local/sbin/nginx /usr/local/nginx/sbin/nginx 2>/dev/null | head -n 1 || true)
NGINX_PID=

start_nginx() {
    local dir=$1 root=$2 limit=${3:-} address=${NGINX_ADDRESS:-127.0.0.1}
    mkdir -p "$dir"
    # Try a few random ports: one that looks free can still be taken before nginx binds it.
    for _ in 1 2 3 4 5; do
        PORT=$(shuf -i 20000-60999 -n 1)
        (exec 3<>"/dev/tcp/$address/$PORT") 2>/dev/null && continue   # someone listens there
        # master_process off: a single process serves, so `kill` stops everything.
        # `user root` because as root nginx would otherwise switch to an unprivileged user.
        cat > "$dir/nginx.conf" <<CONF
$( (( EUID == 0 )) && echo "user root;" )
daemon off;
master_process off;
worker_processes 1;
pid "$dir/nginx.pid";
error_log "$dir/error.log" warn;
$( (( ${NGINX_WORKER_CONNECTIONS:-256} > 256 )) && echo "worker_rlimit_nofile $(( ${NGINX_WORKER_CONNECTIONS} * 2 ));" )
events { worker_connections ${NGINX_WORKER_CONNECTIONS:-256}; }
http {
$( if [[ -n "${NGINX_ACCESS_LOG_FORMAT:-}" ]]; then
    printf "    log_format bench '%s';\n    access_log \"%s\" bench;\n" "$NGINX_ACCESS_LOG_FORMAT" "$dir/access.log"
else
    echo "    access_log off;"
fi )
    sendfile on;
    default_type application/octet-stream;
    client_body_temp_path "$dir/client_body";
    proxy_temp_path "$dir/proxy";
    fastcgi_temp_path "$dir/fastcgi";
    uwsgi_temp_path "$dir/uwsgi";
    scgi_temp_path "$dir/scgi";
    server {
$( if [[ -n "${NGINX_TLS_CERT:-}" && -n "${NGINX_TLS_KEY:-}" ]]; then
    if nginx_at_least 1.25.1; then
        printf '        listen %s:%s ssl;\n        http2 on;\n' "$address" "$PORT"
    else
        printf '        listen %s:%s ssl http2;\n' "$address" "$PORT"
    fi
    printf '        ssl_certificate "%s";\n        ssl_certificate_key "%s";\n' "$NGINX_TLS_CERT" "$NGINX_TLS_KEY"
else
    printf '        listen %s:%s;\n' "$address" "$PORT"
fi )
        root "$root";
        ${NGINX_SERVER_EXTRA:-}
        $( [[ -n "$limit" ]] && echo "limit_rate $limit;" )
    }
}
CONF
        "$NGINX" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" </dev/null >/dev/null 2>&1 &
        NGINX_PID=$!
        for _ in $(seq 100); do   # up to 10 s
            if [[ -n "${NGINX_TLS_CERT:-}" ]]; then
                curl -s -k -o /dev/null -I --max-time 1 "https://$address:$PORT/" && return 0
            else
                curl -s -o /dev/null -I --max-time 1 "http://$address:$PORT/" && return 0
            fi
            kill -0 "$NGINX_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill "$NGINX_PID" 2>/dev/null; wait "$NGINX_PID" 2>/dev/null; NGINX_PID=
    done
    echo "error: nginx did not start; see $dir/error.log" >&2
    cat "$dir/error.log" >&2
    return 1
}

# nginx_at_least VERSION: whether the installed nginx is VERSION or newer.
nginx_at_least() {
    local have
    have=$("$NGINX" -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
    [[ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n 1)" == "$1" ]]
}

stop_nginx() {
    [[ -n "$NGINX_PID" ]] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
    NGINX_PID=
}
