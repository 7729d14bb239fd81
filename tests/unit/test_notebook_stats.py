import json
import re

from playbook_utils import notebook_stats


def _nb(path, cells):
    doc = {"cells": [{"cell_type": kind, "metadata": {}, "source": src,
                      **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                     for kind, src in cells],
           "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(doc))
    return path


def test_counts_lines_cells_words_and_definitions(tmp_path):
    long_cell = "\n".join(f"x{i} = {i}" for i in range(27))          # 27 lines: over 25, not over 30
    longer = "\n".join(f"y{i} = {i}" for i in range(31)) + "\n\n\n"   # 31 lines; blank lines do not count
    a = _nb(tmp_path / "10_a.ipynb", [
        ("markdown", "# 10 · A\n\nThree more words."),
        ("code", "import os\n\n# a comment counts\ndef pick(x):\n    return x\n"),
        ("code", long_cell),
        ("code", ["%matplotlib inline\n", "class Kit:\n", "    def method(self):\n", "        pass\n",
                  "fps_of = lambda r: r\n"]),
        ("code", longer),
    ])
    s = notebook_stats.notebook_stats(a)
    assert (s.code_cells, s.code_lines, s.longest_cell) == (4, 4 + 27 + 5 + 31, 31)
    assert (s.cells_over_25, s.cells_over_30) == (2, 1)
    assert s.markdown_words == 7
    assert s.definitions == {"pick", "Kit", "method", "fps_of"}
    b = _nb(tmp_path / "11_b.ipynb", [("code", "def pick():\n    pass\ndef other():\n    pass"),
                                      ("code", "this is not python(")])
    sb = notebook_stats.notebook_stats(b)
    assert sb.definitions == {"pick", "other"} and len(sb.parse_errors) == 1
    assert notebook_stats.shared_names([s, sb]) == {"pick": ["10_a.ipynb", "11_b.ipynb"]}
    t = notebook_stats.totals([s, sb])
    assert t == {"code_lines": 67 + 5, "cells_over_30": 1, "cells_over_25": 2, "markdown_words": 7,
                 "names_in_several_notebooks": 1}
    table = notebook_stats.format_table([s, sb])
    assert "pick (10_a.ipynb, 11_b.ipynb)" in table and "not parsed" in table


def test_strict_exit_follows_the_limits(tmp_path, capsys, monkeypatch):
    a = _nb(tmp_path / "10_a.ipynb", [("code", "def f():\n    pass")])
    b = _nb(tmp_path / "11_b.ipynb", [("code", "def f():\n    pass")])
    assert notebook_stats.main([str(a)]) == 0 and notebook_stats.main(["--strict", str(a)]) == 0
    assert notebook_stats.main([str(a), str(b)]) == 0            # reports, does not fail
    assert notebook_stats.main(["--strict", str(a), str(b)]) == 1  # f in two notebooks
    assert re.search(r"names_in_several_notebooks +1 +limit +0 +OVER", capsys.readouterr().out)
