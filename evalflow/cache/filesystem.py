"""Refusing a cache folder on a network file system.

The cache's index is SQLite in WAL mode, which needs every process using it on one host, and the
byte-range locks it relies on are unreliable on NFS, Lustre, GPFS, CIFS and friends: concurrent
runs there can corrupt the index or lose entries silently. So a ``cache_dir`` on such a file
system is refused up front, with what to do instead: a node-local folder per job, merged after.

The file-system type comes from the mount table (``/proc/self/mounts``): the mount point that is
the longest prefix of the folder's real path.

>>> filesystem_type("/scratch/me/cache", "n:/x /scratch nfs4 rw 0 0\\nr:/ / ext4 rw 0 0\\n")
'nfs4'
"""

from __future__ import annotations

import os
from pathlib import Path

from evalflow.errors import CacheError

MOUNTS = Path("/proc/self/mounts")
NETWORK_TYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "cifs",
        "smb3",
        "smbfs",
        "beegfs",
        "ceph",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.sshfs",
        "fuse.cephfs",
        "afs",
        "9p",
        "panfs",
        "wekafs",
        "fuse.juicefs",
    }
)


def filesystem_type(path: str | os.PathLike[str], mounts: str) -> str | None:
    """The type of the file system holding ``path``, from a mount table's text (None if none)."""
    best, kind = "", None
    target = os.path.realpath(path)
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def refuse_network_filesystem(directory: Path) -> None:
    """Raise a :class:`CacheError` if ``directory`` is on a network file system."""
    try:
        mounts = MOUNTS.read_text(encoding="utf-8", errors="replace")
    except OSError:  # no mount table (not Linux): nothing to tell
        return
    kind = filesystem_type(directory, mounts)
    if kind in NETWORK_TYPES:
        raise CacheError(
            f"cache_dir {directory} is on a network file system ({kind}), where SQLite's locking is "
            "unreliable and concurrent runs can corrupt the cache. Use a folder on a local disk of each "
            "node (cache_dir=/tmp/evalflow-cache, or $TMPDIR on a cluster node), then merge the "
            "node-local caches into one: python -m evalflow cache merge NODE_CACHE... cache_dir=DEST "
            "(see docs/scaling.md)."
        )
