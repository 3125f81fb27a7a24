"""A TCP relay between Home Assistant and swath whose connections a test can cut."""

from __future__ import annotations

import asyncio
import contextlib

from .swath import free_port


class CuttableProxy:
    """Relays 127.0.0.1:<port> to swath; `cut` drops every connection and refuses new ones."""

    def __init__(self, target_port: int) -> None:
        """Choose a port; nothing listens yet."""
        self.target_port = target_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Listen (again) on the same port."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def cut(self) -> None:
        """Stop listening and close every open connection, both ways."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        self._writers.clear()
        if server is not None:
            # Since Python 3.12 this waits for the connections too: after they were aborted.
            await server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        tasks = {
            asyncio.ensure_future(pipe(reader, up_writer)),
            asyncio.ensure_future(pipe(up_reader, writer)),
        }
        self._tasks |= tasks
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks)
        self._tasks -= tasks
        self._writers -= {writer, up_writer}
