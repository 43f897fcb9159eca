"""The images of ``shapes_vqa``, drawn from each row with Pillow: nothing binary is committed.

A row names a shape, a colour and a digit; :func:`doc_to_image` draws that shape in that colour on
white, with the digit in black seven-segment bars (rectangles only, so every Pillow version draws
the same pixels; a font's rendering would vary). Used as ``doc_to_image: !function
shapes_images.doc_to_image``, which lm-eval calls with the document and reads the PIL images it
returns, as evalflow does.
"""

from __future__ import annotations

from typing import Any

from PIL import Image, ImageDraw  # evalflow's `vision` extra

SIZE = 64
COLOURS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 70, 220), "yellow": (230, 210, 40)}
# segments a..g of a seven-segment digit: (x0, y0, x1, y1) on a 3x5 grid of bar units
_BARS = {
    "a": (0, 0, 3, 1),
    "b": (2, 0, 3, 3),
    "c": (2, 2, 3, 5),
    "d": (0, 4, 3, 5),
    "e": (0, 2, 1, 5),
    "f": (0, 0, 1, 3),
    "g": (0, 2, 3, 3),
}
_DIGITS = {
    0: "abcdef",
    1: "bc",
    2: "abdeg",
    3: "abcdg",
    4: "bcfg",
    5: "acdfg",
    6: "acdefg",
    7: "abc",
    8: "abcdefg",
    9: "abcdfg",
}


def draw(digit: int, shape: str, colour: str, size: int = SIZE) -> Image.Image:
    image = Image.new("RGB", (size, size), (255, 255, 255))
    pen = ImageDraw.Draw(image)
    fill, m = COLOURS[colour], size // 8
    if shape == "circle":
        pen.ellipse([m, m, size - m, size - m], fill=fill)
    elif shape == "square":
        pen.rectangle([m, m, size - m, size - m], fill=fill)
    elif shape == "triangle":
        pen.polygon([(size // 2, m), (size - m, size - m), (m, size - m)], fill=fill)
    else:
        raise ValueError(f"shapes_vqa: unknown shape {shape!r} (circle, square or triangle)")
    unit = size // 16  # the digit is 3x5 units, centred
    x, y = size // 2 - 3 * unit // 2, size // 2 - 5 * unit // 2 + unit
    for bar in _DIGITS[digit]:
        x0, y0, x1, y1 = _BARS[bar]
        pen.rectangle([x + x0 * unit, y + y0 * unit, x + x1 * unit - 1, y + y1 * unit - 1], fill=(0, 0, 0))
    return image


def doc_to_image(doc: dict[str, Any]) -> list[Image.Image]:
    return [draw(int(doc["digit"]), doc["shape"], doc["colour"])]
