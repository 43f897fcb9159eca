"""Scale-out: how requests reach a model: the cache in front, chunks, model replicas.

Lives here: the inference edge (``answer_cache``: per-request memoization in front of a lazily loaded
model, the scored model's and each judge's) and its progress lines (``progress``); ``chunks`` (pure)
decides which requests travel together; ``dispatch`` runs chunks in this process (``workers=1``) and
defines what a finished chunk reports; ``ray_workers`` deals them to Ray actors (``workers>1``),
imported only then. The edge stays the only writer of the cache: it persists each chunk as it
returns, whoever computed it.
May import ``models`` and the rooms below it (see docs/architecture.md); ``judges`` and the rooms above import it.
"""
