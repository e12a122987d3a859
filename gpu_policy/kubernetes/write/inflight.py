"""Writes sent side by side, at most `limit` out at once (`max_requests_in_flight`), so a round's
throughput does not hinge on one answer's latency: against an API server that takes 50 ms to
answer, one write at a time is 20 a second, ten at a time 200.

Each write is fenced (the planning Lease's check) on its worker just before it is sent, and each
answer is handed back on the caller's thread, in the order the answers come: what the caller
keeps (its cache, its counts, the Events still to write) needs no lock. Once a fence or a send
raises, nothing more is sent; the writes already out are answered and handed back, then the
first error is raised, so what was written is known even when the round ends early.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")


class InFlight:
    """A bounded pool of writers; `limit` 1 sends on the caller's thread, one at a time."""

    def __init__(self, limit: int):
        self.limit = limit
        self._pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="gpu-policy-write") \
            if limit > 1 else None

    def send_each(self, items: Iterable[Item], send: Callable[[Item], Answer], done: Callable[[Item, Answer], None],
                  fence: Callable[[], None]) -> None:
        """`fence()` then `send(item)` for each item, at most `limit` at once; `done(item, answer)`
        on this thread as each answer comes."""
        pending = iter(items)
        if self._pool is None:
            for item in pending:
                fence()
                done(item, send(item))
            return
        out: dict[Future, Item] = {}
        error: BaseException | None = None

        def send_next() -> None:
            item = next(pending, _END)
            if item is not _END:
                out[self._pool.submit(_fenced, fence, send, item)] = item

        for _ in range(self.limit):
            send_next()
        while out:
            finished, _ = wait(out, return_when=FIRST_COMPLETED)
            for future in finished:
                item = out.pop(future)
                if future.exception() is not None:
                    error = error or future.exception()
                    continue
                done(item, future.result())
                if error is None:
                    send_next()
        if error is not None:
            raise error


_END = object()


def _fenced(fence: Callable[[], None], send: Callable[[Item], Answer], item: Item) -> Answer:
    fence()
    return send(item)
