"""Scale-out: cutting a run's cache misses into chunks and dealing them to model replicas.

``chunks`` (pure) decides which requests travel together; ``dispatch`` runs chunks in this process
(``workers=1``) and defines what a finished chunk reports; ``ray_workers`` deals them to Ray actors
(``workers>1``), imported only then. The inference edge (:mod:`evalflow.scale.answer_cache`) stays the
only writer of the cache: it persists each chunk as it returns, whoever computed it.
"""
