"""``hydra/callbacks=cache_shard``: each sweep job leaves a copy of its node-local cache where
``cache merge`` can reach it.

On a cluster each job computes into a cache on its node's local disk (``cache_dir`` on a network
file system is refused), and that disk is out of reach once the job ends. This Hydra callback
copies the job's cache, at the end of the job, to ``<sweep dir>/cache-shards/<job number>`` (a
single run: ``<run dir>/cache-shard``) on the shared file system; afterwards

    python -m evalflow cache merge outputs/multirun/DATE/TIME/cache-shards/* cache_dir=~/.cache/evalflow

unions them. The index is copied with SQLite's backup API (a consistent snapshot, even if another
process still uses the cache), value files as plain files; models' side folders (gguf-weights)
are not copied, they are rebuilt where needed.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback

from evalflow.cache.store import VALUE_FILE, default_cache_dir

log = logging.getLogger(__name__)


def copy_cache(source: Path, dest: Path) -> int:
    """A snapshot of the cache folder ``source`` as ``dest`` (which must not exist); the number of
    value files copied."""
    dest.mkdir(parents=True)
    copied = 0
    for path in sorted(source.glob("[0-9a-f][0-9a-f]/[0-9a-f][0-9a-f]/*.val")):
        rel = path.relative_to(source).as_posix()
        if VALUE_FILE.fullmatch(rel):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / rel)
            copied += 1
    src_db, dst_db = sqlite3.connect(source / "cache.db"), sqlite3.connect(dest / "cache.db")
    try:
        src_db.backup(dst_db)  # after the value files: every entry the index names has its file
    finally:
        src_db.close()
        dst_db.close()
    return copied


class CacheShard(Callback):
    """Copies the job's cache folder to the sweep's ``cache-shards/`` when the job ends."""

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        hydra = HydraConfig.get()
        source = Path(config.cache_dir).expanduser() if config.get("cache_dir") else default_cache_dir()
        if str(hydra.mode) == "RunMode.MULTIRUN":
            dest = Path(hydra.sweep.dir) / "cache-shards" / str(hydra.job.num)
        else:
            dest = Path(hydra.runtime.output_dir) / "cache-shard"
        if not (source / "cache.db").is_file():
            log.warning("cache_shard: %s holds no cache; nothing copied", source)
            return
        shutil.rmtree(dest, ignore_errors=True)  # a re-run job replaces its shard
        files = copy_cache(source, dest)
        log.info("cache_shard: copied the cache %s (%d value files) to %s", source, files, dest)
