"""zstd of texts and facts JSON, whole or as a delta against another text (the codec of
kb.schema's Blob and BlobFacts rows). Only the standard library and zstandard: the ingest's
analysis workers import it without the database layers.

A raw-content dictionary makes a delta of one text against another, and successive versions
of a file differ in a few lines. A row holds a whole text (its `base` is None) or a delta
against the previous text of its path, which may be a delta itself: a read undoes at most
MAX_TEXT_CHAIN deltas and decompresses at most CHAIN_BYTES (server_args.py, 344 kB, is read
through at most 11 deltas: ~1.5 ms). Every frame carries a checksum of its content, so a
delta undone against the wrong base raises zstandard.ZstdError instead of returning another
text.
"""

from __future__ import annotations

import zstandard

LEVEL = 3  # higher levels cost several times the CPU for a few percent
# A path's first text, stored whole (the largest rows: ~1,100 of 7,800 texts, over half the
# bytes): level 6 makes them 8% smaller than 3 for 0.12 s more CPU over SGLang's history.
WHOLE_LEVEL = 6
# The ingest's workers compress each likely-cited text whole for the trip to the parent,
# which stores most of them as deltas: level 1 costs 25% less CPU for 5% more bytes in the
# few stored whole.
FAST_LEVEL = 1
MAX_TEXT_CHAIN = 32  # longest chain of blob text deltas (the source view reads one)
MAX_FACTS_CHAIN = 32  # of facts deltas (an ingest reads each chain's links once)
CHAIN_BYTES = 4_000_000  # most bytes a read of one row decompresses, its bases' included
SMALL = 4  # a delta over 1/SMALL of the raw size is not worth a link: stored whole
MAX_READ_CHAIN = 1024  # a read gives up beyond this (two runs' chains can meet; never loops)


class Chains:
    """Stores each text (or facts JSON) of a path as a zstd delta against the previous one
    stored in this run: the versions come in order, so the base is the neighbour the delta
    is smallest against. A chain ends (the next row is whole) after `max_depth`
    deltas, or once a read would undo more than `max_bytes` (what a read costs is the bytes
    it decompresses). Keeps the last bytes of each path, what the next delta needs: raw, or
    packed (`compact`, or as the caller gave them in `whole`)."""

    def __init__(self, max_depth: int, max_bytes: int = CHAIN_BYTES, compact: bool = False) -> None:
        self.max_depth, self.max_bytes = max_depth, max_bytes
        # compact: each path's last bytes are kept pack_fast'd, not raw (a fifth of the
        # memory, for a decompression when the next delta needs them)
        self.compact = compact
        # path -> (key, depth, bytes a read of it decompresses, raw or None, whole or None)
        self._last: dict[str, tuple[str, int, int, bytes | None, bytes | None]] = {}
        self.stored: set[str] = set()  # keys known to be in the database (blob_rows')

    def pack(
        self,
        path: str,
        key: str,
        data: bytes | None,
        whole: bytes | None = None,
        delta: tuple[str, bytes] | None = None,
    ) -> tuple[bytes, str | None, int]:
        """(packed, the key it is a delta against or None, depth). `whole`: the data packed
        whole (pack or pack_fast) if the caller has it already (then `data` may be None:
        unpacked only if a delta needs it). `delta`: (key, pack(data, that key's data)) if
        the caller made one already: used when that key is the path's last (the same bytes
        this would make, without unpacking either text)."""
        if data is None:
            assert whole is not None
            size = zstandard.frame_content_size(whole)
            if size < 0:  # (a frame written without its size)
                data = unpack(whole)
                size = len(data)
        else:
            size = len(data)
        last = self._last.get(path)
        if last is not None and last[1] < self.max_depth and last[2] + size <= self.max_bytes:
            if delta is not None and delta[0] == last[0]:
                packed = delta[1]
            else:
                data = _raw(data, whole)
                packed = pack(data, _raw(last[3], last[4]))
            if len(packed) <= size // SMALL:
                self._keep(path, (key, last[1] + 1, last[2] + size), data, whole)
                return packed, last[0], last[1] + 1
        self._keep(path, (key, 0, size), data, whole)
        return (whole if whole is not None else pack(_raw(data, whole))), None, 0

    def _keep(
        self, path: str, link: tuple[str, int, int], data: bytes | None, whole: bytes | None
    ) -> None:
        if whole is not None:
            data = None  # the packed bytes are enough (unpacked if a delta needs them)
        elif self.compact:
            data, whole = None, pack_fast(_raw(data, whole))
        self._last[path] = (*link, data, whole)


def _raw(data: bytes | None, whole: bytes | None) -> bytes:
    """`data`, or `whole` unpacked: the chains keep the worker's packed text as it came."""
    if data is not None:
        return data
    assert whole is not None
    return unpack(whole)


def pack(data: bytes, base: bytes | None = None, level: int = LEVEL) -> bytes:
    """zstd of `data` with a content checksum, as a delta against `base` when one is given."""
    if base is None:
        return zstandard.ZstdCompressor(level=level, write_checksum=True).compress(data)
    prefix = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    compressor = zstandard.ZstdCompressor(level=level, dict_data=prefix, write_checksum=True)
    return compressor.compress(data)


def pack_fast(data: bytes) -> bytes:
    """pack(data) at FAST_LEVEL, with one compressor per process (unpack reads it alike)."""
    global _fast
    if _fast is None:
        _fast = zstandard.ZstdCompressor(level=FAST_LEVEL, write_checksum=True)
    return _fast.compress(data)


_fast: zstandard.ZstdCompressor | None = None  # not shared by threads: the workers have one


def unpack(data: bytes, base: bytes | None = None) -> bytes:
    """The bytes `pack(…, base)` packed; zstandard.ZstdError when `base` is not the one."""
    if base is None:
        return zstandard.ZstdDecompressor().decompress(data)
    prefix = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdDecompressor(dict_data=prefix).decompress(data)


def unpack_chain(frames: list[bytes]) -> bytes:
    """Undo a chain given as [whole frame, delta, delta, ...] (oldest first)."""
    data = unpack(frames[0])
    for frame in frames[1:]:
        data = unpack(frame, data)
    return data
