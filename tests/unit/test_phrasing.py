"""The tests assert behaviour (values, shapes, files, decisions), not phrasing: at most 5% of their asserts check
that a phrase appears in a text (issue 57's bar)."""

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PHRASE = re.compile(r"[A-Za-z]{2,}[ ,;:]+[A-Za-z0-9]")  # words with a space or punctuation between them


def _is_phrase(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(PHRASE.search(node.value))
    )


def phrase_asserts(tree) -> tuple[int, int]:
    """(asserts, those checking for a phrase: `"some words" in text`, an f-string in a text, or a regex, prefix or
    suffix test with such words)."""
    total = phrasing = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        total += 1
        for c in ast.walk(node.test):
            membership = isinstance(c, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in c.ops)
            if membership and any(_is_phrase(x) for x in ast.walk(c.left)):
                phrasing += 1
                break
            text_test = isinstance(c, ast.Call) and getattr(c.func, "attr", None) in (
                "search", "match", "fullmatch", "startswith", "endswith"
            )  # fmt: skip
            if text_test and any(_is_phrase(a) for a in c.args):
                phrasing += 1
                break
    return total, phrasing


def test_the_counter_sees_a_phrase_and_not_a_value():
    code = 'assert "took too long" in msg\nassert x == 3\nassert "pyav" in names\nassert re.search("no such file", e)'
    assert phrase_asserts(ast.parse(code)) == (4, 2)


def test_at_most_5_percent_of_the_asserts_are_about_phrasing():
    counts = [phrase_asserts(ast.parse(p.read_text())) for p in TESTS.rglob("*.py")]
    total, phrasing = sum(t for t, _ in counts), sum(p for _, p in counts)
    assert total > 1000 and phrasing <= 0.05 * total, (phrasing, total)
