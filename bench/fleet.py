#!/usr/bin/env python3
"""The daemon's queue in SQLite and in PostgreSQL, on the same job, in the same run.

usage: bench/fleet.py [--haul .build-release/release/haul] [--files 20000] [--size 1024] [--big 0]
                      [--batch 1000] [--stores sqlite,postgresql,fleet] [--daemons 3] [--no-kill]
                      [--rounds 1] [-j 16] [--cap 900]

Serves --files files of --size bytes from a private nginx on 127.0.0.1, starts a throwaway
PostgreSQL cluster (initdb in a temp folder; run as the `postgres` user when this runs as root),
then for each store in turn (rounds interleaved) starts `haul daemon` fresh (new state folder, new
database, new download folder), adds every file through system.multicall of --batch aria2.addUri,
and waits until getGlobalStat says nothing is active or waiting. Reports the wall time from the
first call to the last download's end, the adding alone, the daemon's CPU time and peak RSS (the
daemon's alone: not the PostgreSQL server's), the whole machine's CPU time over the same span (every
process: on a machine of few cores the wall follows it), and checks every file byte-identical (sha256) and
nginx's access log (each file sent once), stopping with an error otherwise.

Stores: `sqlite` and `postgresql` are one daemon each; `fleet` is --daemons daemons on one
PostgreSQL database (same --rpc-secret, same -j, one shared download folder), every file added
through the first one's RPC, and the second killed with -9 once a third of the files are done
(--no-kill keeps it): the fleet is done when its live daemons together have stopped every file.
Its CPU and RSS are the daemons' summed and largest. A fleet may send a file twice (one the kill
caught in flight, fetched again by another daemon): the count is printed against the bound of
2 x -j; any other store sending one twice is an error. "Sent twice" is counted in bytes: a file
whose bodies add up to more than its size and a sixteenth.

--big N adds N files of 32 MiB, served at 8 MiB/s each (nginx's limit_rate), to the list.
"""
import argparse
import hashlib
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


def wait_for_port(port, process, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError("process exited with %s" % process.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %d" % port)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds():
    """CPU time the whole machine spent busy so far (every process: daemons, PostgreSQL, nginx, this script)."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class RPC:
    def __init__(self, port):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.next_id = 0

    def call(self, method, *params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": str(self.next_id), "method": method, "params": ["token:bench"] + list(params)})
        self.connection.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        answer = json.loads(self.connection.getresponse().read())
        if "error" in answer:
            raise RuntimeError("%s: %s" % (method, answer["error"]))
        return answer["result"]

    def metrics(self):
        """The daemon's /metrics, as {name: summed value} (labels summed away)."""
        self.connection.request("GET", "/metrics", headers={"Authorization": "Bearer bench"})
        text = self.connection.getresponse().read().decode()
        samples = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            name = name.split("{")[0]
            samples[name] = samples.get(name, 0.0) + float(value)
        return samples


def as_postgres(command):
    """`command` run as the postgres user when this is root (PostgreSQL refuses root)."""
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + command if os.geteuid() == 0 else command


class Postgres:
    def __init__(self, work):
        versions = sorted((int(v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()), reverse=True)
        if not versions:
            sys.exit("error: PostgreSQL is not installed (apt-get install -y postgresql)")
        self.bin = "/usr/lib/postgresql/%d/bin" % versions[0]
        self.directory = os.path.join(work, "postgres")
        os.makedirs(self.directory)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        data = os.path.join(self.directory, "data")
        subprocess.run(as_postgres([self.bin + "/initdb", "-D", data, "-U", "haul", "-A", "trust", "--no-sync", "-E", "UTF8",
                                    "--locale=C"]), check=True, stdout=subprocess.DEVNULL)
        self.port = free_port()
        # Durable as a production server would be (fsync on): the store's commits cost what they cost.
        self.process = subprocess.Popen(as_postgres([self.bin + "/postgres", "-D", data, "-h", "127.0.0.1", "-p", str(self.port),
                                                     "-k", "", "-c", "max_connections=100"]),
                                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "postgres.log"), "w"))
        wait_for_port(self.port, self.process)
        for _ in range(100):
            if subprocess.run([self.bin + "/pg_isready", "-h", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.1)
        self.databases = 0

    def new_database(self):
        self.databases += 1
        name = "haul%d" % self.databases
        subprocess.run(as_postgres([self.bin + "/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "haul", name]), check=True)
        return "postgresql://haul@127.0.0.1:%d/%s?sslmode=disable" % (self.port, name)

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=30)


class Nginx:
    def __init__(self, work, root):
        self.directory = os.path.join(work, "nginx")
        os.makedirs(self.directory)
        self.port = free_port()
        self.log = os.path.join(self.directory, "access.log")
        config = os.path.join(self.directory, "nginx.conf")
        with open(config, "w") as f:
            f.write("""%s
daemon off; master_process off; worker_processes 1; pid "%s/nginx.pid"; error_log "%s/error.log" warn;
events { worker_connections 1024; }
http {
    log_format bench '$request_uri $status $body_bytes_sent';
    access_log "%s" bench;
    sendfile on; default_type application/octet-stream;
    client_body_temp_path "%s/b"; proxy_temp_path "%s/p"; fastcgi_temp_path "%s/f"; uwsgi_temp_path "%s/u"; scgi_temp_path "%s/s";
    server { listen 127.0.0.1:%d; root "%s"; keepalive_requests 100000; location /big/ { limit_rate 8m; } }
}
""" % (("user root;" if os.geteuid() == 0 else ""), *([self.directory] * 2), self.log, *([self.directory] * 5), self.port, root))
        self.process = subprocess.Popen(["nginx", "-c", config, "-p", self.directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.process)

    def truncate_log(self):
        open(self.log, "w").close()

    def sent_twice(self, sizes):
        """How many files were sent more than once: more body bytes than the file holds, give or
        take a sixteenth (a segmented download's ranges add up to the file once, plus what a
        range cut short had sent past the point where another connection took over)."""
        sent = {}
        with open(self.log) as f:
            for line in f:
                path, status, count = line.split()
                if status in ("200", "206"):
                    sent[path] = sent.get(path, 0) + int(count)
        return sum(1 for path, count in sent.items() if count > sizes[path.lstrip("/")] * 17 // 16)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def run_daemon(haul, store, work, nginx, names, digests, sizes, args):
    state = tempfile.mkdtemp(prefix="state-", dir=work)
    out = tempfile.mkdtemp(prefix="out-", dir=work)
    port = free_port()
    command = [haul, "daemon", "--rpc-listen-port", str(port), "--state-dir", state, "-d", out, "-j", str(args.j),
               "--rpc-secret", "bench", "--max-connections-per-host", str(args.per_host), "-q"]
    if store != "sqlite":
        command += ["--store", store]
    nginx.truncate_log()
    daemon = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(os.path.join(state, "daemon.log"), "w"))
    try:
        wait_for_port(port, daemon)
        rpc = RPC(port)
        started = time.monotonic()
        machine = machine_cpu_seconds()
        add_all(rpc, nginx, names, args.batch)
        added = time.monotonic() - started
        deadline = started + args.cap
        while True:
            stat = rpc.call("aria2.getGlobalStat")
            if int(stat["numActive"]) == 0 and int(stat["numWaiting"]) == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("did not finish in %d s: %r" % (args.cap, stat))
            time.sleep(0.05)
        wall = time.monotonic() - started
        machine = machine_cpu_seconds() - machine
        stopped = int(rpc.call("aria2.getGlobalStat")["numStopped"])
        cpu = cpu_seconds(daemon.pid)
        rss = peak_rss_kib(daemon.pid)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    bad = sum(1 for name in names if digests[name] != file_digest(os.path.join(out, os.path.basename(name))))
    twice = nginx.sent_twice(sizes)
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    if bad or stopped != len(names) or twice:
        raise RuntimeError("%s: %d files wrong or missing, %d stopped of %d, %d sent twice" % (store, bad, stopped, len(names), twice))
    return {"wall": wall, "added": added, "cpu": cpu, "machine": machine, "rss": rss / 1024, "twice": twice}


def add_all(rpc, nginx, names, batch):
    for first in range(0, len(names), batch):
        calls = [{"methodName": "aria2.addUri", "params": ["token:bench", ["http://127.0.0.1:%d/%s" % (nginx.port, name)]]}
                 for name in names[first:first + batch]]
        answers = rpc.call("system.multicall", calls)
        faults = [a for a in answers if not (isinstance(a, list) and len(a) == 1)]
        if faults:
            raise RuntimeError("addUri failed: %r" % faults[:1])


def run_fleet(haul, store, work, nginx, names, digests, sizes, args):
    """--daemons daemons on `store`, one shared folder; the second killed at a third done."""
    out = tempfile.mkdtemp(prefix="out-", dir=work)
    nginx.truncate_log()
    daemons, ports, states = [], [], []
    try:
        for index in range(args.daemons):
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            port = free_port()
            command = [haul, "daemon", "--rpc-listen-port", str(port), "--state-dir", state, "-d", out, "-j", str(args.j),
                       "--rpc-secret", "bench", "--max-connections-per-host", str(args.per_host), "--store", store]
            daemons.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(os.path.join(state, "daemon.log"), "w")))
            ports.append(port)
            states.append(state)
        for port, daemon in zip(ports, daemons):
            wait_for_port(port, daemon)
        rpcs = [RPC(port) for port in ports]
        # Every member has looked at the fleet once (a look a second): the first offers to all.
        time.sleep(1.2)
        started = time.monotonic()
        machine = machine_cpu_seconds()
        add_all(rpcs[0], nginx, names, args.batch)
        added = time.monotonic() - started
        deadline = started + args.cap
        killed = None
        cpu = 0.0
        while True:
            # Any daemon's getGlobalStat counts the whole fleet; the first is never killed.
            stats = rpcs[0].call("aria2.getGlobalStat")
            stopped = int(stats["numStopped"])
            if killed is None and args.kill and len(daemons) > 1 and stopped >= len(names) // 3:
                cpu += cpu_seconds(daemons[1].pid)
                daemons[1].kill()
                daemons[1].wait()
                killed = 1
                killed_at = time.monotonic() - started
                continue
            if stopped >= len(names):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("did not finish in %d s: %r" % (args.cap, stats))
            time.sleep(0.05)
        wall = time.monotonic() - started
        machine = machine_cpu_seconds() - machine
        rss = 0
        # The store's side, from the live daemons' /metrics: claims made, and the group commits' mean latency.
        claims, commit_seconds, commits = 0.0, 0.0, 0.0
        for i in range(len(daemons)):
            if i == killed:
                continue
            samples = rpcs[i].metrics()
            claims += samples.get("haul_fleet_claims_total", 0)
            commit_seconds += samples.get("haul_store_commit_duration_seconds_sum", 0)
            commits += samples.get("haul_store_commit_duration_seconds_count", 0)
        print("  (claims by the live daemons %d, %.0f a second of wall; %d commits, mean %.1f ms)"
              % (claims, claims / wall, commits, 1000 * commit_seconds / max(commits, 1)), flush=True)
        for i in range(len(daemons)):
            if i == killed:
                continue
            cpu += cpu_seconds(daemons[i].pid)
            rss = max(rss, peak_rss_kib(daemons[i].pid))
            daemons[i].send_signal(signal.SIGTERM)
        for i in range(len(daemons)):
            if i != killed:
                daemons[i].wait(timeout=60)
    finally:
        for daemon in daemons:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
    bad = sum(1 for name in names if digests[name] != file_digest(os.path.join(out, os.path.basename(name))))
    twice = nginx.sent_twice(sizes)
    for state in states:
        shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    if bad:
        raise RuntimeError("fleet: %d files wrong or missing" % bad)
    if killed is not None:
        print("  (daemon 2 killed with -9 at %.2f s; files sent twice %d, the bound 2 x -j is %d%s)"
              % (killed_at, twice, 2 * args.j, "" if twice <= 2 * args.j else ": EXCEEDED"), flush=True)
    return {"wall": wall, "added": added, "cpu": cpu, "machine": machine, "rss": rss / 1024, "twice": twice}


def file_digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--haul", default=".build-release/release/haul")
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--big", type=int, default=0)
    parser.add_argument("--stores", default="sqlite,postgresql,fleet")
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--no-kill", dest="kill", action="store_false")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("-j", type=int, default=16)
    # haul's default; in a fleet the limit is the fleet's, shared out among the daemons.
    parser.add_argument("--per-host", type=int, default=16)
    parser.add_argument("--cap", type=int, default=900)
    args = parser.parse_args()
    haul = os.path.abspath(args.haul)
    work = tempfile.mkdtemp(prefix="haul-fleet-")
    os.chmod(work, 0o755)
    nginx = postgres = None
    try:
        root = os.path.join(work, "www")
        os.makedirs(root)
        names, digests, sizes = [], {}, {}
        for index in range(args.files):
            name = "f%06d.bin" % index
            content = os.urandom(args.size)
            with open(os.path.join(root, name), "wb") as f:
                f.write(content)
            names.append(name)
            digests[name] = hashlib.sha256(content).hexdigest()
            sizes[name] = args.size
        if args.big:
            os.makedirs(os.path.join(root, "big"))
        for index in range(args.big):
            name = "big/b%d.bin" % index
            with open(os.path.join(root, name), "wb") as f:
                digest = hashlib.sha256()
                for _ in range(32):
                    chunk = os.urandom(1 << 20)
                    f.write(chunk)
                    digest.update(chunk)
            names.append(name)
            digests[name] = digest.hexdigest()
            sizes[name] = 32 << 20
        nginx = Nginx(work, root)
        stores = args.stores.split(",")
        if "postgresql" in stores or "fleet" in stores:
            postgres = Postgres(work)
        results = {store: [] for store in stores}
        for round_ in range(args.rounds):
            for store in stores:
                location = "sqlite" if store == "sqlite" else postgres.new_database()
                run = run_fleet if store == "fleet" else run_daemon
                result = run(haul, location, work, nginx, names, digests, sizes, args)
                results[store].append(result)
                print("round %d %-10s wall %.2f s (adding %.2f s), CPU %.2f s (machine %.2f s), peak RSS %.0f MiB, files sent twice %d"
                      % (round_ + 1, store, result["wall"], result["added"], result["cpu"], result["machine"], result["rss"],
                         result["twice"]),
                      flush=True)
        print()
        print("| store | wall (median) | adding | daemon CPU | machine CPU | peak RSS | x SQLite |")
        print("|---|---|---|---|---|---|---|")
        base = statistics.median(r["wall"] for r in results.get("sqlite", [])) if "sqlite" in results else None
        for store, rows in results.items():
            wall = statistics.median(r["wall"] for r in rows)
            print("| %s | %.2f s | %.2f s | %.2f s | %.2f s | %.0f MiB | %s |" % (
                store, wall, statistics.median(r["added"] for r in rows), statistics.median(r["cpu"] for r in rows),
                statistics.median(r["machine"] for r in rows),
                max(r["rss"] for r in rows), ("%.2fx" % (wall / base)) if base else "-"))
    finally:
        if nginx:
            nginx.stop()
        if postgres:
            postgres.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
