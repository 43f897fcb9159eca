"""Write ``shapes_vqa.jsonl``: 12 pictures (a shape, a colour, a digit), one question each.

``python tasks/vision/_make_data.py`` rewrites the file deterministically; it is committed, this
script documents where it comes from. The questions cycle through the three things a picture shows.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED, N = 11, 12
SHAPES, COLOURS = ("circle", "square", "triangle"), ("blue", "green", "red", "yellow")
QUESTIONS = (
    ("What colour is the shape?", "colour"),
    ("What shape is shown?", "shape"),
    ("What digit is on the shape?", "digit"),
)


def rows() -> list[dict[str, object]]:
    rnd = random.Random(SEED)
    out = []
    for i in range(N):
        picture = {"digit": str(rnd.randrange(10)), "shape": rnd.choice(SHAPES), "colour": rnd.choice(COLOURS)}
        question, field = QUESTIONS[i % len(QUESTIONS)]
        out.append({"id": i, **picture, "question": question, "answer": picture[field]})
    return out


if __name__ == "__main__":
    (HERE / "shapes_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows()))
