# A tus 1.0.0 server for bench/upload.sh: aiohttp-tus on /files (as the tests' TusTestServer
# runs it), counting every PATCH body byte it receives, cut-off requests included, into COUNTS.
#   python3 bench/tus-server.py PORT UPLOAD_FOLDER COUNTS_JSON
import json, os, sys
from pathlib import Path
from aiohttp import web
from aiohttp_tus import setup_tus

port, folder, counts = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
received = {"bytes": 0, "patches": 0, "creations": 0}

def save():
    with open(counts + ".tmp", "w") as f:
        json.dump(received, f)
    os.replace(counts + ".tmp", counts)

@web.middleware
async def count(request, handler):
    if request.method == "POST":
        received["creations"] += 1
        save()
    if request.method != "PATCH":
        return await handler(request)
    received["patches"] += 1
    body = bytearray()
    try:
        async for data in request.content.iter_any():
            received["bytes"] += len(data)
            body += data
    finally:
        save()
    request._read_bytes = bytes(body)
    return await handler(request)

app = web.Application(client_max_size=64 << 20, middlewares=[count])
setup_tus(app, upload_path=folder, upload_url="/files", allow_overwrite_files=True)
save()
web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
