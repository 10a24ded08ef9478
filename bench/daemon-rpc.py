#!/usr/bin/env python3
"""Times aria2 JSON-RPC calls against `haul daemon` and `aria2c --enable-rpc` in the same run.

usage: bench/daemon-rpc.py [--haul .build/release/haul] [--downloads 500] [--rounds 3]

Each daemon gets the same queue: N paused downloads (never started, so no network). Then, over
one keep-alive HTTP connection, it times addUri for the N, tellWaiting(0, 1000) returning all N
(200 calls), getGlobalStat (2000 calls) and a 3-call system.multicall as a web page polls it
(500 calls), and reads each daemon's resident memory. Prints a table with haul/aria2c ratios
(below 1 means haul is faster). Everything listens on 127.0.0.1 and is stopped at the end.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RPC:
    def __init__(self, port):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.next_id = 0

    def call(self, method, *params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": str(self.next_id), "method": method, "params": list(params)})
        self.connection.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        answer = json.loads(self.connection.getresponse().read())
        if "error" in answer:
            raise RuntimeError("%s: %s" % (method, answer["error"]))
        return answer["result"]


def wait_for_port(port, process, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("daemon exited with %s" % process.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("daemon did not listen on %d" % port)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def timed(count, action):
    start = time.perf_counter()
    for _ in range(count):
        action()
    return (time.perf_counter() - start) / count * 1000


def measure(name, command, port, workdir, downloads):
    process = subprocess.Popen(command, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        rpc = RPC(port)
        # Port 9 (discard) on loopback: nothing is ever fetched, the downloads stay paused.
        add_ms = timed(downloads, lambda: rpc.call("aria2.addUri", ["http://127.0.0.1:9/file-%d.bin" % time.perf_counter_ns()],
                                                  {"pause": "true", "dir": workdir}))
        waiting = rpc.call("aria2.tellWaiting", 0, 1000)
        assert len(waiting) == downloads, "%s lists %d waiting" % (name, len(waiting))
        results = {
            "addUri": add_ms,
            "tellWaiting(0,1000)": timed(200, lambda: rpc.call("aria2.tellWaiting", 0, 1000)),
            "getGlobalStat": timed(2000, lambda: rpc.call("aria2.getGlobalStat")),
            "multicall (page poll)": timed(500, lambda: rpc.call("system.multicall", [
                {"methodName": "aria2.tellActive", "params": []},
                {"methodName": "aria2.tellWaiting", "params": [0, 1000]},
                {"methodName": "aria2.getGlobalStat", "params": []}])),
        }
        results["RSS MiB"] = rss_kib(process.pid) / 1024
        return results
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--haul", default=".build/release/haul")
    parser.add_argument("--downloads", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    haul = os.path.abspath(args.haul)
    aria2c = shutil.which("aria2c")
    if not os.access(haul, os.X_OK) or not aria2c:
        sys.exit("needs %s (scripts/build-release.sh) and aria2c (apt-get install aria2)" % haul)

    best = {}
    for round_number in range(args.rounds):
        for name in ("haul", "aria2c"):
            workdir = tempfile.mkdtemp(prefix="haul-bench-rpc-")
            port = free_port()
            if name == "haul":
                command = [haul, "daemon", "-q", "--rpc-listen-port", str(port), "--state-dir", os.path.join(workdir, "state")]
            else:
                command = [aria2c, "--enable-rpc", "--rpc-listen-port=%d" % port, "--no-conf", "--quiet",
                           "--max-download-result=%d" % (args.downloads * 2), "--dir=%s" % workdir]
            try:
                results = measure(name, command, port, workdir, args.downloads)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            for key, value in results.items():
                best.setdefault(key, {}).setdefault(name, []).append(value)
        print("round %d done" % (round_number + 1), file=sys.stderr)

    print("%d paused downloads, median of %d rounds (ms per call; RSS in MiB)" % (args.downloads, args.rounds))
    print("%-24s %10s %10s %8s" % ("", "haul", "aria2c", "ratio"))
    for key, values in best.items():
        haul_value = sorted(values["haul"])[len(values["haul"]) // 2]
        aria_value = sorted(values["aria2c"])[len(values["aria2c"]) // 2]
        print("%-24s %10.3f %10.3f %7.2fx" % (key, haul_value, aria_value, haul_value / aria_value))


if __name__ == "__main__":
    main()
