"""From a document to its prompt and requests, byte-identical to lm-eval 0.4.13.

Above :mod:`evalflow.taskspec.format`. :mod:`.templates` (``doc_to_*``), :mod:`.samplers` (few-shot
examples), :mod:`.fewshot_context` (the prompt as turns), :mod:`.chat_format` (the turns through a
chat template), :mod:`.requests` (a document's requests per output type).
"""
