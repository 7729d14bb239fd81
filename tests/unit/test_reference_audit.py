"""The audit of a reference folder (`tools.reference_audit`): today's code, a commit, no problem shown."""

import json
import shutil

from playbook_utils.bench import media
from playbook_utils.tools import reference_audit
from tests.sentences import numbers


def _folder(tmp_path, rows):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# 99 · a lesson"},
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "SMOKE = True", "outputs": []},
        {"cell_type": "code", "metadata": {}, "source": "print(1)", "outputs": []},
    ]
    (nbs / "99_lesson.ipynb").write_text(json.dumps({"cells": cells}))
    ref = tmp_path / "ref"
    ref.mkdir()
    injected = {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": "SMOKE = False"}
    ran = [
        *cells[:2],
        {**injected, "outputs": []},
        {**cells[2], "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}]},
    ]
    (ref / "99_lesson.ipynb").write_text(json.dumps({"cells": ran}))
    (ref / "summary.json").write_text(json.dumps({"notebooks": rows}))
    return nbs, ref


def test_a_copy_of_todays_code_stamped_and_clean_is_current(tmp_path):
    row = {"notebook": "99_lesson.ipynb", "status": "passed", "seconds": 3.0,
           "machine": {"date_utc": "2026-12-04 21:30 UTC", "commit": "abc1234",
                       "media_version": media.MEDIA_VERSION}}  # fmt: skip
    nbs, ref = _folder(tmp_path, [row])
    [a] = reference_audit.audit(ref, nbs, root=tmp_path)
    assert a["same_code"] and a["current"] and a["problems"] == [] and a["changed_since"] is None  # no git here
    assert reference_audit.format_rows([a]).split()[:2] == ["current", "99_lesson.ipynb"]
    fields = reference_audit.format_rows([a]).splitlines()[0].split(", ")  # the code, the files changed: no media
    assert len(fields) == 2
    # the same copy made on the generated clips of an older media version (no stamp: before 4) is not current
    del row["machine"]["media_version"]
    (tmp_path / "older").mkdir()
    nbs, ref = _folder(tmp_path / "older", [row])
    [a] = reference_audit.audit(ref, nbs, root=tmp_path / "older")
    assert a["same_code"] and not a["current"] and a["media_version"] is None
    line = reference_audit.format_rows([a]).splitlines()[0]
    fields = line.split(", ")  # a third field, the media version it was made on: before 4
    assert line.split()[0] == "STALE" and len(fields) == 3 and numbers(fields[-1]) == ["4"]


def test_a_copy_of_other_code_without_a_commit_and_with_a_traceback_is_stale(tmp_path):
    nbs, ref = _folder(tmp_path, [{"notebook": "99_lesson.ipynb", "status": "passed", "machine": {}}])
    nb = json.loads((ref / "99_lesson.ipynb").read_text())
    nb["cells"][-1]["source"] = "print(2)"
    error = {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": []}
    nb["cells"][-1]["outputs"] += [error]
    warnings = ["WARNING: x", "WARNING: y"]
    nb["cells"][-1]["outputs"] += [{"output_type": "stream", "name": "stdout", "text": "\n".join(warnings) + "\n"}]
    (ref / "99_lesson.ipynb").write_text(json.dumps(nb))
    [a] = reference_audit.audit(ref, nbs, root=tmp_path)
    assert not a["same_code"] and not a["current"] and a["commit"] is None
    lines = reference_audit.format_rows([a]).splitlines()  # the row, its two problems indented, the count
    assert len(lines) == 4 and lines[0].split()[:2] == ["STALE", "99_lesson.ipynb"] and "differs" in lines[0]
    assert lines[1].startswith("    ") and numbers(lines[1]) == ["3"]  # in cell 3, its exception's type and message
    assert lines[1].split(": ")[-2:] == [error["ename"], error["evalue"]]
    assert numbers(lines[2]) == ["3", "2"] and lines[2].endswith(warnings[0])  # two warnings, the first shown
    assert numbers(lines[-1]) == ["0", "1"]  # 0 of 1 current
    shutil.rmtree(ref)
    ref.mkdir()
    [gone] = reference_audit.audit(ref, nbs, root=tmp_path)  # no summary, no copy
    assert gone["status"] == "no row" and not gone["copy"]
    assert "code" not in reference_audit.format_rows([gone]).splitlines()[0]  # no copy whose code to compare


def test_the_files_changed_since_a_commit_come_from_git(tmp_path):
    # this checkout: nothing has changed in a path since HEAD that git does not know of, and an unknown commit
    # cannot be told
    head = __import__("subprocess").run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                        cwd=reference_audit.ROOT).stdout.strip()  # fmt: skip
    assert reference_audit.changed_since(head, ["LICENSE-that-does-not-exist"]) == 0
    assert reference_audit.changed_since("0" * 40, ["playbook_utils"]) is None
    assert reference_audit.changed_since(None, ["playbook_utils"]) is None


def test_a_copy_whose_cells_differ_only_in_their_wrapping_is_current_and_one_with_another_comment_is_not(tmp_path):
    row = {"notebook": "99_lesson.ipynb", "status": "passed",
           "machine": {"commit": "abc1234", "media_version": media.MEDIA_VERSION}}  # fmt: skip
    nbs, ref = _folder(tmp_path, [row])
    nb = json.loads((nbs / "99_lesson.ipynb").read_text())
    copy = json.loads((ref / "99_lesson.ipynb").read_text())
    copy["cells"][-1]["source"] = 'print("a long line, "\n      "split in two")  # why'
    for today, current in [
        ('print("a long line, split in two")  # why', True),  # the two strings joined: the same program
        ('print("a long line, split in 2")  # why', False),
        ('print("a long line, split in two")  # another why', False),
        ("%time print(1)", False),  # not Python: its text compared
    ]:
        nb["cells"][-1]["source"] = today
        (nbs / "99_lesson.ipynb").write_text(json.dumps(nb))
        (ref / "99_lesson.ipynb").write_text(json.dumps(copy))
        [a] = reference_audit.audit(ref, nbs, root=tmp_path)
        assert (a["same_code"], a["current"], a["same_text"]) == (current, current, False), today
    copy["cells"][-1]["source"] = nb["cells"][-1]["source"]  # a magic compared by its text: the same text
    (ref / "99_lesson.ipynb").write_text(json.dumps(copy))
    [a] = reference_audit.audit(ref, nbs, root=tmp_path)
    assert a["same_code"] and a["same_text"] and a["current"]
