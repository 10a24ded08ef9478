#!/usr/bin/env python3
"""The daemon with a long queue: `haul daemon` beside `aria2c --enable-rpc`, in the same run.

usage: bench/daemon-scale.py [--haul .build/release/haul] [--daemons haul,aria2c] [--rounds 1]
                             [--prefill 20000] [--adds 10000] [--multicall 10000] [--batch 1000]
                             [--pages 200] [--page-size 100] [--rss-total 100000] [--cap 1800]

Each daemon, started fresh on a free loopback port with throwaway folders, is given in turn:
  1. --prefill paused downloads (addUri with "pause": "true" through system.multicall in batches
     of --batch; timed, but only as the set-up);
  2. --adds more, one aria2.addUri call each: ms per call (mean, median, p99, and the mean of the
     first and last tenth, to show growth with the queue);
  3. --multicall more through system.multicall in batches of --batch: ms per download and per batch,
     and the daemon's CPU time per batch;
  4. --pages aria2.tellWaiting pages of --page-size, consecutive, centred on the middle of the
     queue: ms per page;
  5. the peak resident memory (VmHWM of /proc/PID/status) so far, then more paused downloads
     (batches again) until --rss-total are queued, and VmHWM and VmRSS there.
Then it is stopped with SIGTERM (the time to exit is reported). URLs point at 127.0.0.1:9 (nothing
listens there) and every download stays paused, so nothing is fetched. Each call must succeed and
the queue must hold what was added (getGlobalStat's numWaiting), or the script stops with an error.
A daemon still busy after --cap seconds has its remaining figures reported as "did not finish".
Prints a markdown table with haul/aria2c ratios (below 1: haul is faster or smaller).
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DidNotFinish(Exception):
    pass


class RPC:
    def __init__(self, port, deadline):
        self.port = port
        self.deadline = deadline
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.next_id = 0

    def call(self, method, *params):
        if time.monotonic() > self.deadline:
            raise DidNotFinish()
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": str(self.next_id), "method": method, "params": list(params)})
        self.connection.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        answer = json.loads(self.connection.getresponse().read())
        if "error" in answer:
            raise RuntimeError("%s: %s" % (method, answer["error"]))
        return answer["result"]


def wait_for_port(port, process, seconds=30):
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


def cpu_seconds(pid):
    """User + system CPU time of the process so far (/proc/PID/stat), in seconds: less moved by a
    busy machine than wall time (commits and writes on other threads of the daemon count too)."""
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid):
    """(VmHWM, VmRSS) in KiB."""
    values = {}
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0])
    return values.get("VmHWM", 0), values.get("VmRSS", 0)


class Queue:
    """Adds uniquely named paused downloads to one daemon."""

    def __init__(self, rpc, directory):
        self.rpc = rpc
        self.directory = directory
        self.added = 0

    def _next(self):
        self.added += 1
        return ["http://127.0.0.1:9/d%07d.bin" % self.added], {"pause": "true", "dir": self.directory}

    def add_one(self):
        uris, options = self._next()
        gid = self.rpc.call("aria2.addUri", uris, options)
        if not isinstance(gid, str):
            raise RuntimeError("addUri answered %r" % (gid,))

    def add_batch(self, count):
        calls = []
        for _ in range(count):
            uris, options = self._next()
            calls.append({"methodName": "aria2.addUri", "params": [uris, options]})
        answers = self.rpc.call("system.multicall", calls)
        faults = [a for a in answers if not (isinstance(a, list) and len(a) == 1 and isinstance(a[0], str))]
        if len(answers) != count or faults:
            raise RuntimeError("multicall of %d addUri: %d answers, first fault %r" % (count, len(answers), faults[:1]))

    def fill_to(self, total, batch):
        while self.added < total:
            self.add_batch(min(batch, total - self.added))

    def check(self):
        waiting = int(self.rpc.call("aria2.getGlobalStat")["numWaiting"])
        if waiting != self.added:
            raise RuntimeError("the daemon counts %d waiting, %d were added" % (waiting, self.added))


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(name, command, port, workdir, args):
    """Runs the phases against one daemon; returns {figure: value or None (did not finish)}."""
    results = {}
    downloads = os.path.join(workdir, "downloads")
    os.makedirs(downloads)
    process = subprocess.Popen(command, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process)
        rpc = RPC(port, time.monotonic() + args.cap)
        queue = Queue(rpc, downloads)
        try:
            start = time.perf_counter()
            queue.fill_to(args.prefill, args.batch)
            queue.check()
            results["prefill"] = time.perf_counter() - start

            latencies = []
            for _ in range(args.adds):
                start = time.perf_counter()
                queue.add_one()
                latencies.append((time.perf_counter() - start) * 1000)
            if latencies:
                tenth = max(1, len(latencies) // 10)
                results["add mean"] = statistics.fmean(latencies)
                results["add median"] = statistics.median(latencies)
                results["add p99"] = percentile(latencies, 0.99)
                results["add first"] = statistics.fmean(latencies[:tenth])
                results["add last"] = statistics.fmean(latencies[-tenth:])

            batches = []
            cpu = []
            remaining = args.multicall
            while remaining > 0:
                count = min(args.batch, remaining)
                cpu_start = cpu_seconds(process.pid)
                start = time.perf_counter()
                queue.add_batch(count)
                batches.append(((time.perf_counter() - start) * 1000, count))
                cpu.append((cpu_seconds(process.pid) - cpu_start) * 1000)
                remaining -= count
            if batches:
                results["multicall per download"] = sum(ms for ms, _ in batches) / sum(n for _, n in batches)
                results["multicall per batch"] = statistics.median(ms for ms, _ in batches)
                results["multicall cpu per batch"] = statistics.median(cpu)
                results["multicall last batch"] = batches[-1][0]
            queue.check()

            total = queue.added
            first = max(0, (total - args.pages * args.page_size) // 2)
            pages = []
            for page in range(args.pages):
                offset = first + page * args.page_size
                start = time.perf_counter()
                answer = rpc.call("aria2.tellWaiting", offset, args.page_size)
                pages.append((time.perf_counter() - start) * 1000)
                expected = max(0, min(args.page_size, total - offset))
                if len(answer) != expected:
                    raise RuntimeError("tellWaiting(%d, %d) gave %d entries, expected %d" % (offset, args.page_size, len(answer), expected))
            if pages:
                results["page median"] = statistics.median(pages)
                results["page mean"] = statistics.fmean(pages)
            results["queued"] = total
            results["hwm mid"] = memory_kib(process.pid)[0] / 1024

            if args.rss_total > queue.added:
                start = time.perf_counter()
                queue.fill_to(args.rss_total, args.batch)
                queue.check()
                results["fill to rss total"] = time.perf_counter() - start
            hwm, rss = memory_kib(process.pid)
            results["hwm total"] = hwm / 1024
            results["rss total"] = rss / 1024
            results["rss queued"] = queue.added
        except DidNotFinish:
            print("%s: still busy after %d s (%d downloads queued); the rest did not finish" % (name, args.cap, queue.added),
                  file=sys.stderr)
            results["did not finish"] = queue.added
    finally:
        start = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
            results["shutdown"] = time.perf_counter() - start
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            print("%s: did not exit within 120 s of SIGTERM; killed" % name, file=sys.stderr)
        errors = process.stderr.read().decode(errors="replace").strip()
        if errors:
            print("%s said on stderr: %s" % (name, errors[-2000:]), file=sys.stderr)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--haul", default=".build/release/haul")
    parser.add_argument("--daemons", default="haul,aria2c", help="comma-separated: haul, aria2c")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--prefill", type=int, default=20000)
    parser.add_argument("--adds", type=int, default=10000)
    parser.add_argument("--multicall", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--rss-total", type=int, default=100000)
    parser.add_argument("--cap", type=int, default=1800, help="seconds per daemon and round")
    args = parser.parse_args()
    daemons = [d for d in args.daemons.split(",") if d]
    if not daemons or any(d not in ("haul", "aria2c") for d in daemons):
        sys.exit("--daemons takes haul and/or aria2c")
    if min(args.rounds, args.batch, args.page_size, args.cap) < 1 or min(args.prefill, args.adds, args.multicall, args.pages) < 0:
        sys.exit("counts must not be negative; rounds, batch, page size and cap at least 1")
    haul = os.path.abspath(args.haul)
    aria2c = shutil.which("aria2c")
    if "haul" in daemons and not os.access(haul, os.X_OK):
        sys.exit("needs %s: scripts/build-release.sh (or pass --haul PATH)" % haul)
    if "aria2c" in daemons and not aria2c:
        sys.exit("needs aria2c: apt-get install -y aria2")

    print("== %s" % " ".join(sys.argv))
    with open("/proc/loadavg") as f:
        print("machine: %d cores, load average %s" % (os.cpu_count(), " ".join(f.read().split()[:3])))
    if aria2c:
        print("aria2c: %s" % subprocess.run([aria2c, "--version"], capture_output=True, text=True).stdout.splitlines()[0])
    if "haul" in daemons:
        print("haul: %s" % haul)
    print("queue: %d paused first, %d addUri, %d through multicall (batches of %d), %d tellWaiting pages of %d, RSS at %d"
          % (args.prefill, args.adds, args.multicall, args.batch, args.pages, args.page_size, args.rss_total))

    collected = {}
    for round_number in range(args.rounds):
        order = daemons[round_number % len(daemons):] + daemons[:round_number % len(daemons)]
        for name in order:
            workdir = tempfile.mkdtemp(prefix="haul-bench-scale-")
            port = free_port()
            if name == "haul":
                command = [haul, "daemon", "-q", "--rpc-listen-port", str(port), "--state-dir", os.path.join(workdir, "state")]
            else:
                command = [aria2c, "--enable-rpc", "--rpc-listen-port=%d" % port, "--no-conf", "--quiet",
                           "--rpc-max-request-size=64M", "--dir=%s" % workdir]
            try:
                started = time.perf_counter()
                results = measure(name, command, port, workdir, args)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            print("round %d %s: %.1f s; %s" % (round_number + 1, name, time.perf_counter() - started,
                  ", ".join("%s %.3f" % (k, v) for k, v in results.items())), file=sys.stderr)
            for key, value in results.items():
                collected.setdefault(key, {}).setdefault(name, []).append(value)

    def median(key, name):
        values = collected.get(key, {}).get(name, [])
        return statistics.median(values) if len(values) == args.rounds else None

    rows = [
        ("set-up: %d paused through multicall, s" % args.prefill, "prefill"),
        ("addUri one call each (%d), ms per call: mean" % args.adds, "add mean"),
        ("addUri: median", "add median"),
        ("addUri: p99", "add p99"),
        ("addUri: mean of the first tenth", "add first"),
        ("addUri: mean of the last tenth", "add last"),
        ("system.multicall, batches of %d (%d), ms per download" % (args.batch, args.multicall), "multicall per download"),
        ("system.multicall: median ms per batch", "multicall per batch"),
        ("system.multicall: median CPU ms per batch (the daemon's)", "multicall cpu per batch"),
        ("system.multicall: ms for the last batch", "multicall last batch"),
        ("tellWaiting, %d pages of %d from the middle, ms per page: median" % (args.pages, args.page_size), "page median"),
        ("tellWaiting: mean", "page mean"),
        ("peak RSS (VmHWM) with %d queued, MiB" % (args.prefill + args.adds + args.multicall), "hwm mid"),
        ("set-up: fill to %d, s" % args.rss_total, "fill to rss total"),
        ("peak RSS (VmHWM) with %d queued, MiB" % args.rss_total, "hwm total"),
        ("RSS (VmRSS) with %d queued, MiB" % args.rss_total, "rss total"),
        ("exit after SIGTERM, s", "shutdown"),
    ]
    print()
    print("Median of %d round(s); %s." % (args.rounds, "; ".join(daemons)))
    print()
    print("| figure | %s |%s" % (" | ".join(daemons), " haul / aria2c |" if len(daemons) == 2 else ""))
    print("| --- |%s" % (" --- |" * (len(daemons) + (1 if len(daemons) == 2 else 0))))
    for label, key in rows:
        values = [median(key, name) for name in daemons]
        if all(v is None for v in values) and key not in collected:
            if key == "fill to rss total":
                continue
        cells = ["%.3f" % v if v is not None else "did not finish" for v in values]
        ratio = ""
        if len(daemons) == 2:
            h, a = (values[daemons.index("haul")], values[daemons.index("aria2c")])
            ratio = " %.2f× |" % (h / a) if h is not None and a else " |"
        print("| %s | %s |%s" % (label, " | ".join(cells), ratio))
    for name in daemons:
        unfinished = collected.get("did not finish", {}).get(name)
        if unfinished:
            print("%s did not finish within %d s in %d round(s) (queue at %s)" % (name, args.cap, len(unfinished), unfinished))


if __name__ == "__main__":
    main()
