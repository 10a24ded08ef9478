#!/usr/bin/env python3
"""Set Haul's network options on a download through the aria2p client library, as an aria2
front end would, and read them back.

usage: aria2p_options.py --port P --secret S --dir D --cookies FILE [--host H] [--timeout T] URL

URL must answer only with Basic credentials me:pw and the cookie k=v (from FILE). Steps: addUri
with all-proxy (a closed port, bypassed by no-proxy), http-user, http-passwd,
check-certificate=false, header and load-cookies; getOption shows them, the password masked;
the download completes; an option Haul does not know is an error naming it. Prints one line per
step and "[aria2p_options] PASS"; exit 0 on success, 1 on a failed check or timeout.
"""
import argparse
import sys
import time

import aria2p


def check(condition, what):
    print(f"[aria2p_options] {'ok' if condition else 'FAILED'}: {what}", flush=True)
    if not condition:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="http://127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", default="")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--cookies", required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("url")
    args = parser.parse_args()
    client = aria2p.Client(host=args.host, port=args.port, secret=args.secret)

    options = {
        "dir": args.dir,
        "all-proxy": "http://127.0.0.1:9",
        "no-proxy": "127.0.0.1",
        "http-user": "me",
        "http-passwd": "pw",
        "check-certificate": "false",
        "header": ["X-From-Aria2p: yes"],
        "load-cookies": args.cookies,
    }
    gid = client.add_uri([args.url], options)
    check(isinstance(gid, str) and len(gid) == 16, f"addUri answered GID {gid}")

    shown = client.get_option(gid)
    for name, value in [("all-proxy", "http://127.0.0.1:9"), ("no-proxy", "127.0.0.1"), ("http-user", "me"),
                        ("http-passwd", "********"), ("check-certificate", "false"), ("load-cookies", args.cookies)]:
        check(shown.get(name) == value, f"getOption {name} = {shown.get(name)!r}")
    check(shown.get("header") == ["X-From-Aria2p: yes"], f"getOption header = {shown.get('header')!r}")
    check("pw" not in str(shown).replace("********", ""), "the password is not in getOption's answer")

    deadline = time.monotonic() + args.timeout
    status = {}
    while time.monotonic() < deadline:
        status = client.tell_status(gid, ["status", "errorMessage"])
        if status.get("status") in ("complete", "error"):
            break
        time.sleep(0.1)
    check(status.get("status") == "complete", f"the download ended {status}")

    try:
        client.add_uri([args.url], {"dir": args.dir, "bt-max-peers": "5"})
        check(False, "an unknown option was accepted")
    except aria2p.ClientException as error:
        check("option bt-max-peers is not supported by Haul" in str(error), f"an unknown option is refused: {error}")
    print("[aria2p_options] PASS", flush=True)


if __name__ == "__main__":
    main()
