"""Tiny grayscale images as binary PGM (P5) files: written and read with the standard library."""
from __future__ import annotations

from pathlib import Path

SIZE = 8


def write_pgm(path: Path, pixels: list[int], size: int = SIZE) -> None:
    path.write_bytes(f"P5\n{size} {size}\n255\n".encode() + bytes(pixels))


def read_pgm(path: Path) -> list[float]:
    """Pixels of a P5 image scaled to 0..1."""
    data = path.read_bytes()
    header, _, rest = data.partition(b"\n255\n")
    magic, dims = header.split(b"\n", 1)
    if magic != b"P5":
        raise ValueError(f"{path} is not a binary PGM image")
    width, height = (int(v) for v in dims.split())
    pixels = rest[: width * height]
    if len(pixels) != width * height:
        raise ValueError(f"{path} is truncated: {len(pixels)} of {width * height} pixels")
    return [p / 255.0 for p in pixels]
