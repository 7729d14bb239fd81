"""Children side by side: every answer comes back under its key, and a child that dies or hangs is an answer too."""

from playbook_utils import child


def test_call_all_returns_each_childs_answer_or_how_it_failed():
    ok = "from playbook_utils import child; child.reply(lambda: {'n': 6 * 7})"
    answers = child.call_all(
        {
            "ok": child.python("-c", ok),
            "died": child.python("-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"),
            "hung": child.python("-c", "import time; time.sleep(30)"),
        },
        timeout=5,
    )
    assert answers["ok"]["status"] == "ok" and answers["ok"]["n"] == 42
    assert answers["died"]["status"] == "crashed" and "exit 3" in answers["died"]["error"]
    assert "boom" in answers["died"]["error"]
    assert answers["hung"]["status"] == "timeout"
