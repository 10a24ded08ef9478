# Sourced by the HTTPS benchmarks: make_bench_tls DIR makes, once, a test CA (DIR/ca.pem) and a
# certificate for 127.0.0.1 signed by it (DIR/server.pem, DIR/server.key), P-256 keys, valid for
# 30 days; later runs reuse them while they are valid. Sets BENCH_CA, BENCH_CERT and BENCH_KEY.
make_bench_tls() {
    local dir=$1
    command -v openssl >/dev/null || { echo "error: openssl not found; apt-get install -y openssl" >&2; exit 2; }
    mkdir -p "$dir"
    BENCH_CA=$dir/ca.pem BENCH_CERT=$dir/server.pem BENCH_KEY=$dir/server.key
    if [[ -s "$BENCH_CERT" ]] && openssl x509 -checkend 86400 -noout -in "$BENCH_CERT" >/dev/null 2>&1; then return 0; fi
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=bench-ca \
        -keyout "$dir/ca.key" -out "$BENCH_CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
        -keyout "$BENCH_KEY" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' > "$dir/ext.cnf"
    openssl x509 -req -in "$dir/server.csr" -CA "$BENCH_CA" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
        -extfile "$dir/ext.cnf" -out "$BENCH_CERT" 2>/dev/null
}
