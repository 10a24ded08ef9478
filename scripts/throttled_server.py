#!/usr/bin/env python3
"""A small HTTP/1.1 file server for the demo: honours Range and If-Range (with an ETag) and
sends at most RATE bytes per second per connection, so a download can be interrupted.

usage: throttled_server.py FOLDER PORT RATE
"""
import http.server
import os
import sys
import time

FOLDER, PORT, RATE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _target(self):
        name = os.path.basename(self.path.split("?")[0])
        path = os.path.join(FOLDER, name)
        return path if name and os.path.isfile(path) else None

    def _head(self, send_body):
        path = self._target()
        if path is None:
            self.send_error(404)
            return None
        info = os.stat(path)
        size, etag = info.st_size, '"%x-%x"' % (int(info.st_mtime), info.st_size)
        start, end, status = 0, size - 1, 200
        wanted = self.headers.get("Range", "")
        if_range = self.headers.get("If-Range")
        if wanted.startswith("bytes=") and (if_range is None or if_range == etag):
            first, _, last = wanted[6:].partition("-")
            if first.isdigit():
                start = int(first)
                end = min(int(last), size - 1) if last.isdigit() else size - 1
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                status = 206
        self.send_response(status)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(end - start + 1))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        return (path, start, end) if send_body else None

    def do_HEAD(self):
        self._head(False)

    def do_GET(self):
        plan = self._head(True)
        if plan is None:
            return
        path, start, end = plan
        slice_size = max(RATE // 20, 1)
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(slice_size, left))
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                left -= len(chunk)
                time.sleep(len(chunk) / RATE)


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # A client that hangs up (Ctrl-C, a finished segment) is not worth a traceback.


Server(("127.0.0.1", PORT), Handler).serve_forever()
