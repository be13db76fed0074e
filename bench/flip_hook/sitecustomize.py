"""Imported at start-up by a broker that bench/metrics_flip.py runs with this directory first on
PYTHONPATH (Python imports ``sitecustomize`` by itself).  With ``ODRADEK_FLIP_MODE_FILE`` set,
the broker's socket server answers SIGHUP by reading that file: ``off`` takes the request
observer (the request metrics) off every connection and off the ones to come, ``on`` puts it
back, so one broker process runs with and without request metrics in turns and its own luck
(memory layout, hash seed) is on both sides of each comparison.  Bench code only: it reaches
into the channel's private fields, as no broker option should."""

import os

_MODE_FILE = os.environ.get("ODRADEK_FLIP_MODE_FILE")

if _MODE_FILE:
    import asyncio
    import signal
    from pathlib import Path

    from odradek.net.server import SocketServer

    _start = SocketServer.start

    async def _start_with_flip(self: SocketServer) -> dict[str, int]:
        ports = await _start(self)
        observer = self.observer
        assert observer is not None, "metrics_flip needs a broker with metrics.port set"

        def flip() -> None:
            on = Path(_MODE_FILE).read_text().strip() == "on"
            self.observer = observer if on else None
            for connection in self.connections:
                channel = connection.channel
                if not on:
                    channel.answers_written()  # what was released is reported while the observer is there
                channel.observer = observer if on else None
                channel._observer_tags = observer.tags if on else {}
                connection._observed = on

        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, flip)
        return ports

    SocketServer.start = _start_with_flip  # type: ignore[method-assign]
