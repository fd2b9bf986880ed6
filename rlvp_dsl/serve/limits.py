"""The request body size limit (``--max-body``): a body longer than the limit is a 413.

The body is read as it arrives and never held past the limit.  What a client sends after the
limit is read and dropped (up to `DRAIN_LIMIT` more bytes), so that it can read the 413 instead of
finding its connection reset mid-upload (as nginx's "lingering close" does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

#: The default limit: 128 MiB (10,000 chat episodes of a few kB each fit with room to spare).
DEFAULT_MAX_BODY = 128 * 1024 * 1024

#: At most this many bytes past the limit are read (and dropped) before the 413 is sent.
DRAIN_LIMIT = 256 * 1024 * 1024


class BodyTooLarge(Exception):
    """A body longer than the limit.

    Attributes:
        limit: the limit, in bytes.
        size: the body's size as declared (``Content-Length``) or as counted so far, in bytes.
    """

    def __init__(self, limit: int, size: int) -> None:
        super().__init__(
            f"the body is {size} bytes or more; this server takes at most {limit} bytes "
            "(rlvp serve --max-body BYTES; or send the episodes in smaller batches)"
        )
        self.limit = limit
        self.size = size


async def read_limited(chunks: AsyncIterator[bytes], limit: int, declared: str | None = None) -> bytes:
    """The whole body from `chunks`, or `BodyTooLarge` once it passes `limit` bytes.

    Args:
        chunks: the body as it arrives (Starlette's ``request.stream()``).
        limit: the most bytes allowed.
        declared: the ``Content-Length`` header, when sent.

    Raises:
        BodyTooLarge: the declared or the counted size passes `limit`.
    """
    declared_size = int(declared) if declared is not None and declared.strip().isdigit() else None
    over = declared_size is not None and declared_size > limit
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            over = True
        if over:
            if size > limit + DRAIN_LIMIT:
                break
            continue
        parts.append(chunk)
    if over:
        raise BodyTooLarge(limit, max(size, declared_size or 0))
    return b"".join(parts)
