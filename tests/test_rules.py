"""docs/rules.md against the code registry: every code it names exists and is of the kind its
*when* column says, every rule has codes or a reason, each quote is verbatim in its guide (when
../shared/seeds is here), every published code is placed, and the printed counts are true."""
import pathlib
import re

import pytest

from mlpipe.codes import CODES

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "rules.md"
GUIDES = {"D": "000_459bc450c5154797.txt", "P": "002_424af6989bbed56a.txt"}
ROW = re.compile(r"^\| (R\d{2,3}) \| ([^|]+) \| “([^”]+)” \| ([DP]) · ([^|]+) \| ([^|]+) \| "
                 r"([^|]+) \| ([^|]*) \|$")
WHEN = {"check", "load", "run", "evidence"}


def _rows() -> list[tuple[str, ...]]:
    lines = [line for line in DOC.read_text().splitlines() if line.startswith("| R")]
    rows = []
    for line in lines:
        m = ROW.match(line)
        assert m, f"docs/rules.md: a table row not in the form of the others: {line[:80]}"
        rows.append(tuple(g.strip() for g in m.groups()))
    return rows


def _codes(cell: str) -> list[str]:
    return [] if cell == "—" else [c.strip() for c in cell.split(",")]


def kind(code: str) -> str:
    """When a code is reported: check, run or evidence (from its family)."""
    n = int(code[2:])
    if (520 <= n <= 527 or 540 <= n <= 549 or 560 <= n <= 569  # MP54x: the trace; MP56x: rehearse
            or n == 804 or 900 <= n <= 959):
        return "run"
    if 660 <= n <= 679 or 700 <= n <= 799 or 870 <= n <= 874:  # MP870-: what a sync could not read
        return "evidence"
    return "check"


def _seeds() -> pathlib.Path | None:
    for folder in (ROOT, *ROOT.parents):
        found = folder.parent / "shared" / "seeds"
        if all((found / name).exists() for name in GUIDES.values()):
            return found
    return None


def test_rows_are_numbered_in_order():
    ids = [r[0] for r in _rows()]
    assert ids == [f"R{i:02d}" for i in range(1, len(ids) + 1)]


def test_every_code_named_exists_and_is_of_the_kind_its_row_says():
    for rid, _, _, _, _, codes, when, _ in _rows():
        whens = set() if when == "—" else {w.strip() for w in when.split(",")}
        assert whens <= WHEN, f"{rid}: unknown 'when' {whens - WHEN}"
        kinds = set()
        for code in _codes(codes):
            if code == "loader":
                kinds.add("load")
                continue
            assert code in CODES, f"{rid} names {code}, which mlpipe/codes/ does not publish"
            kinds.add(kind(code))
        assert kinds == whens, f"{rid}: its codes are reported at {sorted(kinds)}, the row " \
                               f"says {sorted(whens)}"


def test_every_rule_has_codes_or_says_why_it_cannot_be_checked():
    for rid, _, _, _, _, codes, _, note in _rows():
        if not _codes(codes):
            assert note.startswith("not checkable"), f"{rid}: no code and no reason"
        else:
            assert not note.startswith("not checkable"), f"{rid}: codes and 'not checkable'"


def test_every_published_code_is_in_the_table_or_placed_outside_it():
    text = DOC.read_text()
    in_table = {c for r in _rows() for c in _codes(r[5])}
    outside = text.split("## Codes that enforce no rule of the guides", 1)[1]
    placed = set(re.findall(r"MP\d{3}", outside))
    for a, b in re.findall(r"MP(\d{3})–MP(\d{3})", outside):
        placed |= {f"MP{n:03d}" for n in range(int(a), int(b) + 1)}
    missing = sorted(set(CODES) - in_table - placed)
    assert missing == [], f"published codes docs/rules.md does not place: {missing}"
    assert placed & set(CODES) and not (placed & in_table), "a code both enforces a rule " \
                                                            "and is listed as enforcing none"


def test_the_printed_counts_are_true():
    rows = _rows()
    enforced = sum(1 for r in rows if _codes(r[5]))
    m = re.search(r"<!-- rules counts -->\n\*\*(\d+) rules: (\d+) enforced, (\d+) not "
                  r"checkable\.\*\*", DOC.read_text())
    assert m, "docs/rules.md lost its counts line"
    assert tuple(map(int, m.groups())) == (len(rows), enforced, len(rows) - enforced)


def test_the_printed_shares_by_when_are_true():
    rows, counts = _rows(), {"check": 0, "both": 0, "run": 0, "evidence": 0, "none": 0}
    for row in rows:
        whens = set() if row[6] == "—" else {w.strip() for w in row[6].split(",")}
        first = ("check" if whens & {"check", "load"} else "run" if "run" in whens
                 else "evidence" if whens else "none")
        counts[first] += 1
        counts["both"] += first == "check" and "run" in whens

    def share(n: int) -> str:
        return f"{n} ({round(100 * n / len(rows))} %)"

    line = (f"**When they are enforced: at check time {share(counts['check'])}, "
            f"{counts['both']} of them also after a run; only after a step ran "
            f"{share(counts['run'])}; only in the evidence {share(counts['evidence'])}; not "
            f"checkable {share(counts['none'])}.**")
    text = DOC.read_text()
    assert "<!-- rules fractions -->\n" + line + "\n" in text, f"docs/rules.md should say: {line}"


SEEDS = _seeds()


@pytest.mark.skipif(SEEDS is None, reason="the guides are absent: ../shared/seeds holds them")
def test_each_quote_and_section_is_in_its_guide():
    assert SEEDS is not None
    text = {g: re.sub(r"\s+", " ", (SEEDS / name).read_text()) for g, name in GUIDES.items()}
    for rid, _, quote, guide, section, *_ in _rows():
        assert re.sub(r"\s+", " ", quote) in text[guide], f"{rid}: quote not in guide {guide}"
        assert section == "opening" or section in text[guide], \
            f"{rid}: section {section!r} not in guide {guide}"
