#!/usr/bin/env python3
"""A loopback TCP forwarder that counts the bytes clients send through it.

    count-forwarder.py LISTEN_PORT TARGET_PORT COUNTS_JSON

Every connection to 127.0.0.1:LISTEN_PORT is joined to 127.0.0.1:TARGET_PORT. The bytes each
client sends (HTTP heads included) are added up and written to COUNTS_JSON as {"bytes": N}
every 20 ms while they change and whenever a connection ends, so a benchmark reads what a
client sent even after the client is killed.
"""
import asyncio
import json
import os
import sys

listen_port, target_port, counts_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sent = 0


def save():
    temporary = counts_path + ".tmp"
    with open(temporary, "w") as out:
        json.dump({"bytes": sent}, out)
    os.replace(temporary, counts_path)


async def pipe(reader, writer, counted):
    global sent
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            if counted:
                sent += len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        if counted:
            save()
        try:
            writer.close()
        except Exception:
            pass


async def join(client_reader, client_writer):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(
        pipe(client_reader, server_writer, True), pipe(server_reader, client_writer, False))


async def saver():
    saved = -1
    while True:
        if sent != saved:
            saved = sent
            save()
        await asyncio.sleep(0.02)


async def main():
    save()
    asyncio.get_running_loop().create_task(saver())
    server = await asyncio.start_server(join, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
