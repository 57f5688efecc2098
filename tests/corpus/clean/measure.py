"""Measure the checker's false positives: how many of the precision corpus's pipelines, and how
many warnings on the third-party Azure ML YAML in ../shared/corpus/ (``loads: yes``), the
checker of the checkout on PYTHONPATH reports. Prints one JSON document.

    PYTHONPATH=. python tests/corpus/clean/measure.py [--shared]

A pipeline counts as a false positive when ``check --fail-on warning`` would fail on it: it
fails to load, or it has a warning or an error. Run it with another checkout on PYTHONPATH to
measure that checkout on the same corpus (docs/checks.md, "Precision").
"""
from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
# ../shared from the checkout (or from a worktree of it)
SHARED = next((f.parent / "shared" / "corpus" / "azure-ai-ml-test-configs"
               for f in (ROOT, *ROOT.parents)
               if (f.parent / "shared" / "corpus" / "azure-ai-ml-test-configs").is_dir()),
              ROOT.parent / "shared" / "corpus" / "azure-ai-ml-test-configs")


def _judge(target: str) -> tuple[str | None, list[tuple[str, str]]]:
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    try:
        spec, found = load_spec(target)
        _, more = check_pipeline(spec)
    except Exception as exc:  # a load failure is a failed gate too
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}", []
    return None, [(d.code, d.severity.value) for d in [*found, *more]]


def corpus_targets() -> list[str]:
    sys.path.insert(0, str(HERE))
    from generate import VARIANTS

    out = [f"{HERE / 'pipelines' / v.name}.py:{v.name}" for v in VARIANTS]
    out += [str(p) for p in sorted((HERE / "yaml").glob("*/pipeline.yml"))]
    out += [str(p) for p in sorted((ROOT / "pipelines").glob("d*.py"))]   # the example
    return out


def shared_targets() -> list[str]:
    manifest = SHARED / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    rows = [line.split("\t") for line in manifest.read_text().splitlines()[1:]]
    return [str(SHARED / r[0]) for r in rows if len(r) >= 4 and r[3].strip() == "yes"]


def measure(targets: list[str]) -> dict:
    failing, warnings, errors, loads = [], collections.Counter(), collections.Counter(), []
    for target in targets:
        failure, found = _judge(target)
        bad = [c for c, sev in found if sev in ("warning", "error")]
        for code, sev in found:
            if sev == "warning":
                warnings[code] += 1
            elif sev == "error":
                errors[code] += 1
        if failure is not None:
            loads.append((Path(target.split(":")[0]).name, failure))
        if failure is not None or bad:
            failing.append(Path(target.split(":")[0]).name)
    return {"pipelines": len(targets), "failing": len(failing),
            "warnings": sum(warnings.values()), "errors": sum(errors.values()),
            "by_code": dict(sorted((warnings + errors).items())), "failed_to_load": loads,
            "failing_names": failing}


if __name__ == "__main__":
    targets = shared_targets() if "--shared" in sys.argv else corpus_targets()
    print(json.dumps(measure(targets), indent=1))
