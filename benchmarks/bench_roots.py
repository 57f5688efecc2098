"""Artifact roots (issue 14): what resolving a key costs a reuse check, and what fetching an
artifact from a shared root costs, each against a named baseline measured in the same run.

1. A reuse check whose artifact is in the own root: ``ArtifactRoots.resolve`` (key -> path,
   digest confirmed through the stat cache) against ``snapshot(path, cache)`` on the same path,
   which is what a reuse check did before keys (``ArtifactStore.verify``). Goal: <= 1.5x.
2. An artifact the own root lacks, fetched from a shared folder: ``resolve`` (copy into a
   staging folder, re-hash, rename into place) against ``shutil.copytree`` of the same folder
   alone (the copy, without the re-hash that makes the fetched copy trustworthy). Goal: <= 3x.

The artifact is a folder of ``--files`` files (64 KiB each). Best of ``--repeat``, alternated.
Run: ``.venv/bin/python benchmarks/bench_roots.py [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from goals import Goals

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlpipe.digests.snapshot import StatCache, snapshot
from mlpipe.evidence.storage.roots import ArtifactRoots, FolderRoot, key_of


def _artifact(folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    for i in range(files):
        (folder / f"part-{i:04d}.bin").write_bytes(os.urandom(64 * 1024))


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=None)
    Goals.add_argument(parser)
    args = parser.parse_args()
    files = args.files or (50 if args.quick else 400)
    repeat = args.repeat or (3 if args.quick else 7)
    goals = Goals.from_args(args)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        scratch = tmp_path / "scratch" / "model"
        _artifact(scratch, files)
        digest = snapshot(scratch).digest
        key = key_of(digest, "model")
        shared = tmp_path / "shared"
        (shared / key).parent.mkdir(parents=True)
        shutil.copytree(scratch, shared / key)
        own = tmp_path / "own"
        (own / key).parent.mkdir(parents=True)
        shutil.copytree(scratch, own / key)
        cache = StatCache(tmp_path / "statcache.sqlite")
        roots = ArtifactRoots(own, FolderRoot(shared), cache)
        roots.resolve(key, digest)  # warm the stat cache, as a second run finds it
        cache.flush()

        hit = base_hit = float("inf")
        for _ in range(repeat):
            hit = min(hit, _best(lambda: roots.resolve(key, digest), 1))
            base_hit = min(base_hit, _best(lambda: snapshot(own / key, cache), 1))

        fetch = base_copy = float("inf")
        for i in range(repeat):
            empty = ArtifactRoots(tmp_path / f"fresh-{i}", FolderRoot(shared))
            start = time.perf_counter()
            assert empty.resolve(key, digest) is not None
            fetch = min(fetch, time.perf_counter() - start)
            target = tmp_path / f"copy-{i}"
            start = time.perf_counter()
            shutil.copytree(shared / key, target)
            base_copy = min(base_copy, time.perf_counter() - start)
        cache.close()
    size_mb = files * 64 / 1024
    print(f"artifact: {files} files, {size_mb:.1f} MiB; best of {repeat}")
    print(f"reuse check, in the own root: resolve {hit * 1000:.2f} ms vs snapshot "
          f"{base_hit * 1000:.2f} ms ({hit / base_hit:.2f}x)")
    print(f"fetch from a shared folder: resolve {fetch * 1000:.1f} ms vs copytree "
          f"{base_copy * 1000:.1f} ms ({fetch / base_copy:.2f}x)")
    goals.check(f"reuse check in the own root, {files} files", hit / base_hit, "<=", 1.5,
                unit="x snapshot")
    goals.check(f"fetch from a shared folder, {files} files", fetch / base_copy, "<=", 3.0,
                unit="x copytree")
    goals.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
