"""A task's documents: where they are read from, reading them, and their identity in keys.

Above :mod:`evalflow.taskspec.prompts` (``process_docs`` and ``doc_to_image`` are task templates).
:mod:`.docsets` loads a task's documents, :mod:`.datamap` points hub datasets at local files,
:mod:`.jsonl` reads local JSON Lines directly, :mod:`.hub` decides offline mode, :mod:`.images` and
:mod:`.image_files` resolve ``doc_to_image``, :mod:`.decontamination` is lm-eval's n-gram path.
"""
