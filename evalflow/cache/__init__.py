"""Content-addressed storage and the keys' hashing: what a cache key is made of, and where entries live.

Lives here: fingerprints, the hash of the code that runs, the diskcache store, its upkeep, the image table.
May import only ``errors``, ``registry`` and ``core`` (the rooms below it in docs/architecture.md's room order).
"""
