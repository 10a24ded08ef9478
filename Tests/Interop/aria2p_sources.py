#!/usr/bin/env python3
"""Drive one download from several sources through the aria2p client library, as an aria2
front end would.

usage: aria2p_sources.py --port P --secret S --dir D [--host H] [--timeout T] SLOW GONE EXTRA

SLOW serves the file slowly enough to stay active for a few seconds, GONE answers 404 and EXTRA
serves the same file. Steps: addUri with [SLOW, GONE] is one download (one GID) whose getUris
lists both; while it runs, getServers lists SLOW with its speed and not GONE (dropped), and
aria2p's Download model reads each URI; changeUri deletes GONE and adds EXTRA ([1, 1]); the
download completes into D. Prints one line per step and "[aria2p_sources] PASS"; exit 0 on
success, 1 on a failed check or timeout.
"""
import argparse
import os
import sys
import time

import aria2p


def check(condition, what):
    print(f"[aria2p_sources] {'ok' if condition else 'FAILED'}: {what}", flush=True)
    if not condition:
        sys.exit(1)


def wait_for(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        check(time.monotonic() < deadline, f"waiting for {what}")
        time.sleep(0.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="http://127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", default="")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("slow")
    parser.add_argument("gone")
    parser.add_argument("extra")
    args = parser.parse_args()
    api = aria2p.API(aria2p.Client(host=args.host, port=args.port, secret=args.secret))
    client = api.client

    gid = client.add_uri([args.slow, args.gone], {"dir": args.dir, "split": "4", "min-split-size": "1M"})
    check(isinstance(gid, str) and len(gid) == 16, f"addUri with two URIs answered one GID {gid}")
    uris = [entry["uri"] for entry in client.get_uris(gid)]
    check(uris == [args.slow, args.gone], f"getUris lists both sources: {uris}")

    def serving():
        try:
            servers = client.get_servers(gid)
        except aria2p.ClientException:
            return None
        listed = {server["uri"]: server for server in servers[0]["servers"]} if servers else {}
        return listed if args.slow in listed and args.gone not in listed and int(listed[args.slow]["downloadSpeed"]) > 0 else None

    listed = wait_for("getServers to show the live source with its speed", serving, args.timeout)
    check(True, f"getServers: {[(uri, server['downloadSpeed']) for uri, server in listed.items()]}")

    download = api.get_download(gid)
    check([uri["uri"] for uri in download.files[0].uris] == [args.slow, args.gone], "aria2p's Download model reads the sources")

    check(client.change_uri(gid, 1, [args.gone], [args.extra]) == [1, 1], "changeUri deleted GONE and added EXTRA")
    uris = [entry["uri"] for entry in client.get_uris(gid)]
    check(uris == [args.slow, args.extra], f"getUris after changeUri: {uris}")

    status = wait_for(
        "the download to end",
        lambda: (lambda s: s if s.get("status") in ("complete", "error") else None)(client.tell_status(gid, ["status", "errorMessage"])),
        args.timeout)
    check(status.get("status") == "complete", f"the download ended {status}")
    check(os.path.exists(os.path.join(args.dir, os.path.basename(args.slow))), "one file, at the first source's name")
    print("[aria2p_sources] PASS", flush=True)


if __name__ == "__main__":
    main()
