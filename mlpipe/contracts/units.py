"""Units compared as units: ``degC`` and ``°C`` are one unit, ``mm`` and ``cm`` differ by a
factor of ten, ``mm`` and ``kg`` measure different things.

pint parses and converts. It is imported only when two unit strings differ as text, so a
pipeline whose ports state their units alike never pays for it. A unit pint does not know
(``USD``, ``px``) is compared as text. Knows nothing of schemas, specs or checks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class UnitComparison:
    """How a produced unit relates to a required one.

    ``same`` is True when a value means the same in both; ``detail`` says how they differ
    (``1 mm = 0.1 cm``, ``x degC = x + 273.15 K``, different quantities), or why they could
    only be compared as text.
    """

    same: bool
    detail: str | None = None


_REGISTRY: Any = None


def _registry() -> Any:
    global _REGISTRY
    if _REGISTRY is None:
        import pint

        _REGISTRY = pint.UnitRegistry()
    return _REGISTRY


def _number(x: float) -> str:
    return f"{x:.6g}"


@lru_cache(maxsize=512)
def compare_units(have: str | None, want: str | None) -> UnitComparison:
    """Whether a value stated in ``have`` means the same as one stated in ``want``.

    Args:
        have: the producer's (or the file's) unit; None for no unit.
        want: the consumer's (or the contract's) unit; None for no unit.

    Returns:
        A ``UnitComparison``. No unit on one side and a unit on the other differ.

    Example:
        >>> compare_units("degC", "°C").same
        True
        >>> compare_units("mm", "cm").detail
        '1 mm = 0.1 cm'
    """
    a = have.strip() if isinstance(have, str) else None
    b = want.strip() if isinstance(want, str) else None
    if not a and not b:
        return UnitComparison(True)
    if not a or not b:
        return UnitComparison(False)
    if a == b:
        return UnitComparison(True)
    try:
        import pint
    except ImportError:  # a broken install: text is the best we can do
        return UnitComparison(False, "compared as text: pint is not installed")
    ureg = _registry()
    try:
        qa, qb = ureg.Quantity(1, a), ureg.Quantity(1, b)
    except (pint.errors.PintError, Exception):  # pint's parser raises many kinds on text
        # that is no unit: PintError, SyntaxError, tokenize.TokenError, KeyError, ...
        unknown = []
        for unit in (a, b):
            try:
                ureg.Quantity(1, unit)
            except Exception:
                unknown.append(repr(unit))
        what = " and ".join(unknown) or "one of them"
        return UnitComparison(False, f"compared as text: {what} "
                                     f"{'are not units' if len(unknown) > 1 else 'is not a unit'}"
                                     f" mlpipe knows")
    if qa.dimensionality != qb.dimensionality:
        return UnitComparison(False, f"{a!r} and {b!r} measure different quantities "
                                     f"({qa.dimensionality} vs {qb.dimensionality})")
    zero = ureg.Quantity(0, a).to(b).magnitude
    one = ureg.Quantity(1, a).to(b).magnitude
    scale = one - zero
    if math.isclose(zero, 0.0, abs_tol=1e-12) and math.isclose(one, 1.0, rel_tol=1e-9):
        return UnitComparison(True)
    if math.isclose(zero, 0.0, abs_tol=1e-12):
        return UnitComparison(False, f"1 {a} = {_number(one)} {b}")
    sign = "+" if zero >= 0 else "-"
    factor = "x" if math.isclose(scale, 1.0, rel_tol=1e-9) else f"{_number(scale)}·x"
    return UnitComparison(False, f"x {a} = {factor} {sign} {_number(abs(zero))} {b}")


__all__ = ["UnitComparison", "compare_units"]
