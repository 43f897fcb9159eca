"""Read the records of an offline W&B run file (``run-<id>.wandb``), to check what was logged.

wandb 0.31 no longer ships a Python reader. The file is W&B's header (``:W&B``, a 2-byte magic, a
version byte) followed by a LevelDB-style log: 32 KiB blocks of records, each a 7-byte header (crc32,
length, type: 1 full, 2 first, 3 middle, 4 last) and a piece of a serialized ``Record`` protobuf.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK, HEADER = 32768, 7


def records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0 and length == 0:
            break
        pending += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record
