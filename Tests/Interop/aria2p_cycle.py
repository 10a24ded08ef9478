#!/usr/bin/env python3
"""Drive an aria2-compatible JSON-RPC daemon (real aria2c, or Haul's daemon) through one
download cycle using only the public aria2p API.

usage: aria2p_cycle.py --port P --secret S --dir D [--host H] [--timeout T] URL1 URL2 [URL3 ...]

URL1 should be slow/large (it must stay active for a few seconds so it can be paused).
Steps: add URL1 + the others + one extra copy of URL1 (the "victim"); wait until URL1 is
active with bytes; pause it -> "paused"; unpause it -> "active"/"complete"; remove the victim
-> gone or "removed"; wait until URL1 and the others are "complete"; check every file exists
in D with the length aria2p reports. Prints one line per step; exit 0 on success, 1 on a
failed check or timeout, 2 on bad arguments.
"""
import argparse
import importlib.metadata
import os
import sys
import time

import aria2p

POLL = 0.2


class Failure(Exception):
    pass


ADDED = []  # (api, gid) of every download this run created, for best-effort cleanup on failure


def cleanup_after_failure():
    for api, gid in ADDED:
        try:
            api.client.force_remove(gid)
        except Exception:
            pass
        try:
            api.client.remove_download_result(gid)
        except Exception:
            pass


def step(text):
    print("[aria2p_cycle] " + text, flush=True)


def wait_for(description, predicate, timeout):
    """Poll predicate() every POLL seconds until it returns a truthy value or timeout expires."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise Failure("timeout after %.0f s waiting for %s" % (timeout, description))
        time.sleep(POLL)


def refreshed(download):
    download.update()  # aria2.tellStatus
    return download


def describe(download):
    msg = "gid=%s status=%s %d/%d bytes" % (
        download.gid, download.status, download.completed_length, download.total_length)
    if download.status == "error":
        msg += " errorCode=%s errorMessage=%r" % (download.error_code, download.error_message)
    return msg


def fail_if_error(download, what):
    if download.status in ("error", "removed"):
        raise Failure("%s ended in status %r: %s" % (what, download.status, describe(download)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="http://127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", default="")
    parser.add_argument("--dir", required=True, help="download folder (sent as the per-download 'dir' option)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="bound for each wait (default 60 s); final completion gets 3x this")
    parser.add_argument("urls", nargs="+", metavar="URL")
    args = parser.parse_args()
    if len(args.urls) < 2:
        parser.error("need URL1 (slow) and at least one more URL")

    folder = os.path.realpath(args.dir)
    os.makedirs(folder, exist_ok=True)
    step("aria2p version %s, server %s:%d, dir %s" % (
        importlib.metadata.version("aria2p"), args.host, args.port, folder))

    api = aria2p.API(aria2p.Client(host=args.host, port=args.port, secret=args.secret, timeout=10))

    # Step 1: talk to the server at all.
    version = api.client.get_version()
    step("1 getVersion OK: version=%s features=%s" % (version.get("version"), version.get("enabledFeatures")))

    # Step 2: add the downloads. The victim is an extra copy of URL1 saved under another name.
    url1, others = args.urls[0], args.urls[1:]
    options = {"dir": folder}  # option values must be strings for aria2
    d1 = api.add_uris([url1], options=dict(options))
    rest = [api.add_uris([u], options=dict(options)) for u in others]
    victim_name = "aria2p-cycle-victim-%d.bin" % os.getpid()
    victim = api.add_uris([url1], options=dict(options, out=victim_name))
    step("2 added URL1 gid=%s, %d other(s) %s, victim gid=%s (out=%s)" % (
        d1.gid, len(rest), [d.gid for d in rest], victim.gid, victim_name))
    gids = [d1.gid] + [d.gid for d in rest] + [victim.gid]
    ADDED.extend((api, g) for g in gids)
    if len(set(gids)) != len(gids) or any(len(g) != 16 for g in gids):
        raise Failure("GIDs are not 16 distinct characters: %s" % gids)

    # Step 3: URL1 must become active and receive bytes.
    def d1_active_with_bytes():
        d = refreshed(d1)
        if d.status == "complete":
            raise Failure("URL1 completed before it could be paused (use a slower/larger URL1): %s" % describe(d))
        fail_if_error(d, "URL1")
        return d.status == "active" and d.completed_length > 0
    wait_for("URL1 to be active with some bytes", d1_active_with_bytes, args.timeout)
    step("3 URL1 active: %s" % describe(d1))

    # Step 4: pause URL1 (aria2.pause), it must report "paused".
    result = api.pause([d1])
    if result != [True]:
        raise Failure("pause returned %r" % (result,))
    wait_for("URL1 status 'paused'", lambda: refreshed(d1).status == "paused", args.timeout)
    paused_bytes = d1.completed_length
    step("4 paused URL1: %s" % describe(d1))
    if not any(d.gid == d1.gid for d in api.get_downloads()):  # tellActive + tellWaiting + tellStopped
        raise Failure("paused URL1 is missing from get_downloads()")
    step("4b get_downloads() lists paused URL1")

    # Step 5: unpause (aria2.unpause); it must go back to active (or complete).
    result = api.resume([d1])
    if result != [True]:
        raise Failure("resume returned %r" % (result,))

    def d1_resumed():
        d = refreshed(d1)
        fail_if_error(d, "URL1")
        return d.status in ("active", "complete")
    wait_for("URL1 to be active/complete again", d1_resumed, args.timeout)
    step("5 unpaused URL1: %s (had %d bytes when paused)" % (describe(d1), paused_bytes))

    # Step 6: remove the victim (aria2.remove, then aria2p itself calls removeDownloadResult).
    refreshed(victim)
    step("6a victim before remove: %s" % describe(victim))
    result = api.remove([victim])
    if result != [True]:
        raise Failure("remove returned %r" % (result,))

    def victim_gone():
        try:
            d = api.get_download(victim.gid)
        except aria2p.ClientException as error:  # "GID ... is not found" once the result is dropped
            return "gone (%s)" % error
        return "status removed" if d.status == "removed" else None
    outcome = wait_for("victim to be removed", victim_gone, args.timeout)
    if any(d.gid == victim.gid and d.status != "removed" for d in api.get_downloads()):
        raise Failure("victim still listed by get_downloads() with a status other than 'removed'")
    step("6 removed victim: %s" % outcome)
    leftover = os.path.join(folder, victim_name)  # aria2 keeps a removed download's partial file
    if os.path.isfile(leftover):
        os.remove(leftover)
        step("6b deleted the victim's partial file %s" % leftover)

    # Step 7: everything else must complete.
    keep = [d1] + rest

    def all_complete():
        done = 0
        for d in keep:
            refreshed(d)
            fail_if_error(d, "download %s" % d.gid)
            done += d.status == "complete"
        return done == len(keep)
    wait_for("all remaining downloads to complete", all_complete, 3 * args.timeout)
    step("7 all %d remaining download(s) complete" % len(keep))

    # Step 8: the files are in D with the lengths aria2p reports.
    for d in keep:
        if len(d.files) != 1:
            raise Failure("gid %s: expected 1 file, got %d" % (d.gid, len(d.files)))
        f = d.files[0]
        path = os.path.realpath(str(f.path))
        if os.path.dirname(path) != folder:
            raise Failure("gid %s: file %s is not in %s" % (d.gid, path, folder))
        if not os.path.isfile(path):
            raise Failure("gid %s: file %s does not exist" % (d.gid, path))
        size = os.path.getsize(path)
        if not (size == f.length == d.total_length == d.completed_length):
            raise Failure("gid %s: size on disk %d, file length %d, totalLength %d, completedLength %d" % (
                d.gid, size, f.length, d.total_length, d.completed_length))
        step("8 %s: %s has %d bytes as reported" % (d.gid, path, size))

    step("PASS")
    return 0


def run():
    try:
        return main()
    except BaseException:
        cleanup_after_failure()
        raise


if __name__ == "__main__":
    try:
        sys.exit(run())
    except Failure as failure:
        print("[aria2p_cycle] FAIL: %s" % failure, file=sys.stderr, flush=True)
        sys.exit(1)
    except aria2p.ClientException as error:
        print("[aria2p_cycle] FAIL: server returned JSON-RPC error %s" % error, file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception as error:  # connection refused, timeouts, malformed answers ...
        print("[aria2p_cycle] FAIL: %s: %s" % (type(error).__name__, error), file=sys.stderr, flush=True)
        sys.exit(1)
