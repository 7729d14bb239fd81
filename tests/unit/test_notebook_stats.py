import json
import re
from pathlib import Path

import pytest

from playbook_utils.tools import notebook_stats

ROOT = Path(__file__).resolve().parents[2]


def _nb(path, cells):
    doc = {
        "cells": [
            {
                "cell_type": kind,
                "metadata": {},
                "source": src,
                **({"outputs": [], "execution_count": None} if kind == "code" else {}),
            }
            for kind, src in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(doc))
    return path


def test_counts_lines_cells_words_and_definitions(tmp_path):
    long_cell = "\n".join(f"x{i} = {i}" for i in range(27))  # 27 lines: over 25, not over 30
    longer = "\n".join(f"y{i} = {i}" for i in range(31)) + "\n\n\n"  # 31 lines; blank lines do not count
    a = _nb(
        tmp_path / "10_a.ipynb",
        [
            ("markdown", "# 10 · A\n\nThree more words."),
            ("code", "import os\n\n# a comment counts\ndef pick(x):\n    return x\n"),
            ("code", long_cell),
            (
                "code",
                [
                    "%matplotlib inline\n",
                    "class Kit:\n",
                    "    def method(self):\n",
                    "        pass\n",
                    "fps_of = lambda r: r\n",
                ],
            ),
            ("code", longer),
        ],
    )
    s = notebook_stats.notebook_stats(a)
    assert (s.code_cells, s.code_lines, s.longest_cell) == (4, 4 + 27 + 5 + 31, 31)
    assert (s.cells_over_25, s.cells_over_30) == (2, 1)
    assert s.markdown_words == 7
    assert s.definitions == {"pick", "Kit", "method", "fps_of"}
    b = _nb(
        tmp_path / "11_b.ipynb",
        [("code", "def pick():\n    pass\ndef other():\n    pass"), ("code", "this is not python(")],
    )
    sb = notebook_stats.notebook_stats(b)
    assert sb.definitions == {"pick", "other"} and len(sb.parse_errors) == 1
    assert notebook_stats.shared_names([s, sb]) == {"pick": ["10_a.ipynb", "11_b.ipynb"]}
    t = notebook_stats.totals([s, sb])
    assert t == {
        "code_lines": 67 + 5,
        "cells_over_30": 1,
        "cells_over_25": 2,
        "markdown_words": 7,
        "names_in_several_notebooks": 1,
    }
    table = notebook_stats.format_table([s, sb])
    lines = table.splitlines()
    [shared] = [line for line in lines if "pick" in line]  # the shared name with the notebooks defining it
    assert re.findall(r"[\w]+\.ipynb", shared) == ["10_a.ipynb", "11_b.ipynb"]
    [unparsed] = [line for line in lines if sb.parse_errors[0] in line]  # the parse error with its notebook
    assert sb.name in unparsed and s.name not in unparsed


def test_strict_exit_follows_the_limits(tmp_path, capsys, monkeypatch):
    a = _nb(tmp_path / "10_a.ipynb", [("code", "def f():\n    pass")])
    b = _nb(tmp_path / "11_b.ipynb", [("code", "def f():\n    pass")])
    assert notebook_stats.main([str(a)]) == 0 and notebook_stats.main(["--strict", str(a)]) == 0
    assert notebook_stats.main([str(a), str(b)]) == 0  # reports, does not fail
    assert notebook_stats.main(["--strict", str(a), str(b)]) == 1  # f in two notebooks
    assert re.search(r"names_in_several_notebooks +1 +limit +0 +OVER", capsys.readouterr().out)
    assert notebook_stats.main(["--strict", str(tmp_path)]) == 1  # a folder: its numbered notebooks, both
    for wrong in ([str(tmp_path / "12_c.ipynb")], [str(tmp_path / "empty")]):
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(SystemExit) as exit_:  # a usage error naming what it did not find, no traceback
            notebook_stats.main(wrong)
        assert exit_.value.code == 2 and wrong[0] in capsys.readouterr().err


def _executed(path, cells):
    doc = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": src, "outputs": outs, "execution_count": 1}
            for src, outs in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(doc))
    return path


def _stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def test_output_problems_finds_tracebacks_stderr_warnings_and_missing_figures(tmp_path):
    image = {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Image>"}, "metadata": {}}
    clean = _executed(
        tmp_path / "clean.ipynb",
        [
            ("print('exact')", [_stream("exact   16 frames\n")]),
            ("nb.show(fig, 'a.png')", [image]),
            ("if nb.needs_gpu('grid'):\n    nb.show(fig, 'b.png')", [_stream("SKIPPED  grid: no CUDA GPU here\n")]),
            ("fig.savefig('c.png')\nplt.show()", [image]),
        ],
    )
    assert notebook_stats.output_problems(clean) == []
    warned = "[WARN ][03:12:48] INVALID INDEX 300"
    dirty = _executed(
        tmp_path / "dirty.ipynb",
        [
            ("x", [{"output_type": "error", "ename": "RuntimeError", "evalue": "boom", "traceback": []}]),
            ("y", [_stream("[/opt/dali/video_loader.h:162] a notice\n", "stderr")]),
            ("z", [_stream(f"ok\n{warned}\n"), _stream("UserWarning: slow\n")]),
            ("fig.savefig('d.png')\nplt.show()", [_stream("saved\n")]),
            ("nb.show(fig, 'e.png')", []),
        ],
    )
    problems = notebook_stats.output_problems(dirty)
    assert [p.split(":")[0] for p in problems] == ["cell 0", "cell 1", "cell 2", "cell 2", "cell 3", "cell 4"]
    kinds = [p.split(": ")[1] for p in problems]  # what each is, then what it showed
    assert kinds[:4] == ["traceback", "stderr", "warning line", "warning line"]
    assert problems[0].split(": ")[2:] == ["RuntimeError", "boom"]  # the exception's name and value
    assert problems[2].endswith(warned) and "UserWarning" in problems[3]
    assert kinds[4] == kinds[5] and kinds[4] not in kinds[:4]  # a figure without an inline image, in cells 3 and 4


def test_the_committed_notebooks_keep_within_the_limits():
    stats = [notebook_stats.notebook_stats(p) for p in sorted(ROOT.glob("notebooks/[0-9][0-9]_*.ipynb"))]
    assert len(stats) == 14
    over = {k: v for k, v in notebook_stats.totals(stats).items() if v > notebook_stats.LIMITS[k]}
    assert over == {}, "the notebooks are for reading in one sitting: cut before adding"
