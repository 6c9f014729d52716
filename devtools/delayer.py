"""A TCP relay that adds latency on demand: `python -m devtools.delayer LISTEN TARGET --delay-ms N`.

This machine's kernel has no netem qdisc, so the partition run's "+100 ms to PostgreSQL" is made
here: every chunk read from either side is held until `delay` has passed since it arrived, then
written on, in order. The delay is one way, added to each direction, so a round trip costs twice
it; a stream keeps its throughput (chunks in flight are not serialised behind each other's wait).
SIGUSR1 puts the delay in force, SIGUSR2 lifts it: the relay is in the path from the start, and the
fault is switched on mid-sale without cutting a connection.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time


class Relay:
    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.target = target
        self.delay = delay
        self.active = False

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read into a queue stamped with arrival times; a second task writes each chunk when due."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    break
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()
            with contextlib.suppress(OSError):
                writer.write_eof()

        sender = asyncio.create_task(send())
        try:
            while chunk := await reader.read(65536):
                queue.put_nowait((time.monotonic() + (self.delay if self.active else 0.0), chunk))
        except OSError:
            pass
        queue.put_nowait((0.0, b""))
        with contextlib.suppress(OSError):
            await sender

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(self.pump(client_reader, server_writer), self.pump(server_reader, client_writer))
        for writer in (client_writer, server_writer):
            writer.close()


async def main(listen: tuple[str, int], target: tuple[str, int], delay: float) -> None:
    relay = Relay(target, delay)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: setattr(relay, "active", True))
    loop.add_signal_handler(signal.SIGUSR2, lambda: setattr(relay, "active", False))
    server = await asyncio.start_server(relay.serve, *listen)
    async with server:
        await server.serve_forever()


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m devtools.delayer")
    parser.add_argument("listen", type=address, help="host:port to listen on")
    parser.add_argument("target", type=address, help="host:port to relay to")
    parser.add_argument("--delay-ms", type=float, default=50.0, help="added to each direction")
    args = parser.parse_args()
    asyncio.run(main(args.listen, args.target, args.delay_ms / 1000))
