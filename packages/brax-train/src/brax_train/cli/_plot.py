"""The reward-curve PNG: a small numpy rasterizer with a 5x7 bitmap font and a PNG encoder.

Written by hand so that the CLI needs no plotting library: the plot is a line chart with axes,
ticks, a title and a legend, which is all a reward curve needs.
"""

from __future__ import annotations

import itertools
import math
import os
import pathlib
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

_GLYPHS: dict[str, tuple[int, ...]] = {
    "0": (0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110),
    "1": (0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110),
    "2": (0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111),
    "3": (0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110),
    "4": (0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010),
    "5": (0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110),
    "6": (0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110),
    "7": (0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000),
    "8": (0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110),
    "9": (0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100),
    "A": (0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001),
    "B": (0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110),
    "C": (0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110),
    "D": (0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100),
    "E": (0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111),
    "F": (0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000),
    "G": (0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111),
    "H": (0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001),
    "I": (0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110),
    "J": (0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100),
    "K": (0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001),
    "L": (0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111),
    "M": (0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001),
    "N": (0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001),
    "O": (0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110),
    "P": (0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000),
    "Q": (0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101),
    "R": (0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001),
    "S": (0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110),
    "T": (0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100),
    "U": (0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110),
    "V": (0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100),
    "W": (0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010),
    "X": (0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001),
    "Y": (0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100),
    "Z": (0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111),
    " ": (0, 0, 0, 0, 0, 0, 0),
    ".": (0, 0, 0, 0, 0, 0b01100, 0b01100),
    ",": (0, 0, 0, 0, 0b01100, 0b00100, 0b01000),
    "-": (0, 0, 0, 0b11111, 0, 0, 0),
    "+": (0, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0),
    ":": (0, 0b01100, 0b01100, 0, 0b01100, 0b01100, 0),
    "/": (0, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0),
    "(": (0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010),
    ")": (0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000),
    "_": (0, 0, 0, 0, 0, 0, 0b11111),
    "%": (0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011),
    "=": (0, 0, 0b11111, 0, 0b11111, 0, 0),
    "?": (0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0, 0b00100),
}

Color = tuple[int, int, int]

BLUE: Color = (31, 119, 180)
ORANGE: Color = (255, 127, 14)
_GRID: Color = (225, 228, 232)
_AXIS: Color = (60, 60, 60)
_TEXT: Color = (30, 30, 30)


def encode_png(rgb: np.ndarray) -> bytes:
    """PNG bytes of an (H, W, 3) uint8 image (8-bit RGB, no interlace, filter type 0)."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {rgb.shape} {rgb.dtype}")
    h, w, _ = rgb.shape
    rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + chunk(b"IEND", b"")
    )


class Canvas:
    """An RGB image with line, rectangle and text drawing."""

    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        """A `width` x `height` canvas filled with `background`."""
        self.pixels = np.empty((height, width, 3), np.uint8)
        self.pixels[:] = background

    @property
    def width(self) -> int:
        """Width in pixels."""
        return int(self.pixels.shape[1])

    @property
    def height(self) -> int:
        """Height in pixels."""
        return int(self.pixels.shape[0])

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(x0, 0), min(x1, self.width)
        y0, y1 = max(y0, 0), min(y1, self.height)
        if x0 < x1 and y0 < y1:
            self.pixels[y0:y1, x0:x1] = color

    def line(self, x0: float, y0: float, x1: float, y1: float, color: Color, width: int = 1) -> None:
        """A straight line `width` pixels thick (square brush stamped along a DDA walk)."""
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        xs = np.rint(np.linspace(x0, x1, n + 1)).astype(int)
        ys = np.rint(np.linspace(y0, y1, n + 1)).astype(int)
        lo = -(width // 2)
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
            self.rect(x + lo, y + lo, x + lo + width, y + lo + width, color)

    def text(
        self, x: int, y: int, s: str, color: Color = _TEXT, scale: int = 2, anchor: str = "left"
    ) -> None:
        """Draw `s` with its top at `y`; `anchor` ('left', 'center', 'right') places it around `x`."""
        w = text_width(s, scale)
        if anchor == "center":
            x -= w // 2
        elif anchor == "right":
            x -= w
        for ch in s.upper():
            glyph = _GLYPHS.get(ch, _GLYPHS["?"])
            for row, bits in enumerate(glyph):
                for col in range(5):
                    if bits >> (4 - col) & 1:
                        px, py = x + col * scale, y + row * scale
                        self.rect(px, py, px + scale, py + scale, color)
            x += 6 * scale

    def png(self) -> bytes:
        """The canvas as PNG bytes."""
        return encode_png(self.pixels)


def text_width(s: str, scale: int = 2) -> int:
    """Pixel width of `s` drawn at `scale`."""
    return max(len(s) * 6 * scale - scale, 0)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values (1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        lo, hi = lo - 1.0, hi + 1.0
    raw = (hi - lo) / max(count, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        ticks.append(0.0 if abs(v) < step * 1e-9 else v)
        v = start + step * len(ticks)
    if ticks[-1] < hi:
        ticks.append(ticks[-1] + step)
    return ticks


def format_number(v: float) -> str:
    """Short human form: 1500 -> 1.5k, 2000000 -> 2M, 0.25 -> 0.25."""
    a = abs(v)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= div:
            return f"{v / div:.3g}{unit}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


class Series(NamedTuple):
    """One line of a chart."""

    label: str
    """Legend text."""
    x: Sequence[float]
    """Abscissae."""
    y: Sequence[float]
    """Ordinates (non-finite points are skipped)."""
    color: Color
    """Line colour."""


def line_chart(
    series: Sequence[Series], title: str, xlabel: str, ylabel: str, width: int = 800, height: int = 480
) -> Canvas:
    """A line chart of `series` with round ticks, grid, axis labels, a title and a legend."""
    c = Canvas(width, height)
    left, right, top, bottom = 96, width - 24, 44, height - 64
    pts = [
        (float(x), float(y))
        for s in series
        for x, y in zip(s.x, s.y, strict=True)
        if math.isfinite(float(x)) and math.isfinite(float(y))
    ]
    if pts:
        xs, ys = zip(*pts, strict=True)
        xt = nice_ticks(min(min(xs), 0.0), max(xs))
        yt = nice_ticks(min(ys), max(ys))
    else:
        xt, yt = [0.0, 1.0], [0.0, 1.0]
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (right - left)

    def py(y: float) -> float:
        return bottom - (y - y0) / (y1 - y0) * (bottom - top)

    for t in xt:
        c.line(px(t), top, px(t), bottom, _GRID)
        c.line(px(t), bottom, px(t), bottom + 5, _AXIS)
        c.text(int(px(t)), bottom + 10, format_number(t), anchor="center")
    for t in yt:
        c.line(left, py(t), right, py(t), _GRID)
        c.line(left - 5, py(t), left, py(t), _AXIS)
        c.text(left - 10, int(py(t)) - 7, format_number(t), anchor="right")
    c.line(left, top, left, bottom, _AXIS)
    c.line(left, bottom, right, bottom, _AXIS)
    c.text((left + right) // 2, 12, title, anchor="center")
    c.text((left + right) // 2, height - 26, xlabel, anchor="center")
    c.text(8, top - 28, ylabel)
    legend_y = top + 8
    for s in series:
        good = [
            (px(float(x)), py(float(y)))
            for x, y in zip(s.x, s.y, strict=True)
            if math.isfinite(float(x)) and math.isfinite(float(y))
        ]
        for (ax, ay), (bx, by) in itertools.pairwise(good):
            c.line(ax, ay, bx, by, s.color, width=2)
        for gx, gy in good:
            c.rect(int(gx) - 2, int(gy) - 2, int(gx) + 3, int(gy) + 3, s.color)
        if good:
            c.rect(left + 12, legend_y + 5, left + 36, legend_y + 9, s.color)
            c.text(left + 44, legend_y, s.label)
            legend_y += 20
    return c


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: readers never see half a file."""
    p = pathlib.Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")  # plain open: the umask decides permissions
    try:
        with tmp.open("wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_png(path: str | os.PathLike[str], canvas: Canvas) -> None:
    """Write `canvas` to `path` as a PNG, atomically."""
    write_atomic(path, canvas.png())


__all__ = [
    "BLUE",
    "ORANGE",
    "Canvas",
    "Series",
    "encode_png",
    "format_number",
    "line_chart",
    "nice_ticks",
    "text_width",
    "write_atomic",
    "write_png",
]
