"""Children side by side: every answer comes back under its key, and a child that dies or hangs is an answer too."""

from playbook_utils import child
from tests.sentences import numbers


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
    assert answers["died"]["status"] == "crashed" and numbers(answers["died"]["error"])[0] == "3"  # its exit code
    assert "boom" in answers["died"]["error"]
    assert answers["hung"]["status"] == "timeout"


SERVER = (
    "import os, sys, time\n"
    "from playbook_utils import child\n"
    "def warm(w):\n"
    "    if w == 'die':\n"
    "        os._exit(5)\n"
    "    t = time.time()\n"
    "    time.sleep(1.0)\n"  # a start-up
    "    return {'warmed': w, 'window': [t, time.time()], 'pid': os.getpid()}\n"
    "def handle(r):\n"
    "    return {'twice': 2 * r['n'], 'pid': os.getpid(), 'at': time.time()}\n"
    "child.serve_requests(handle, warm=warm)"
)


def test_serve_all_warms_every_child_side_by_side_then_serves_each_key_in_turn():
    groups = {"a": [{"n": 1}, {"n": 2}], "b": [{"n": 3}], "c": [{"n": 4}]}
    got = child.serve_all(
        child.python("-c", SERVER),
        groups,
        warm={"a": {"warm": "a"}, "b": {"warm": "b"}, "c": {"warm": "die"}},
        timeout=60,
    )
    assert {k: [a["twice"] for a in v] for k, v in got.items()} == {"a": [2, 4], "b": [6], "c": [8]}
    # one child per key serves all its requests, and the warmed child is the one that serves them
    assert got["a"][0]["warm"]["pid"] == got["a"][0]["pid"] == got["a"][1]["pid"] != got["b"][0]["pid"]
    # the warm-ups ran side by side, before any request: their windows overlap, and every request came after them
    (a0, a1), (b0, b1) = got["a"][0]["warm"]["window"], got["b"][0]["warm"]["window"]
    assert max(a0, b0) < min(a1, b1) and max(a1, b1) <= got["a"][0]["at"]
    assert got["a"][0]["warm_s"] >= 1.0 and got["b"][0]["warm"]["warmed"] == "b"
    # the keys were served in turn: b's request after a's last
    assert got["a"][1]["at"] <= got["b"][0]["at"] <= got["c"][0]["at"]
    # a child that died warming up is a failed warm-up, not a failed request: a new child serves c
    assert got["c"][0]["status"] == "ok" and got["c"][0]["warm"]["status"] == "crashed"
    assert numbers(got["c"][0]["warm"]["error"])[0] == "5" and got["a"][0]["warm"]["status"] == "ok"  # exit 5


def test_spares_warm_side_by_side_and_each_serves_one_request_then_ends():
    spares = child.Spares(child.python("-c", SERVER), timeout=60)
    spares.start("a", "a", count=2)
    spares.start("b", "die")
    warmed = spares.ready()
    # the warm-ups overlapped: each slept 1 s, and the two of key a ran side by side
    (a0, a1), (b0, b1) = (w["window"] for w in warmed["a"])
    assert max(a0, b0) < min(a1, b1) and warmed["b"][0]["status"] == "crashed"
    first, second = spares.call("a", {"n": 1}), spares.call("a", {"n": 2})
    # one request per child: two requests of key a, two children, each the one that warmed up
    assert (first["twice"], second["twice"]) == (2, 4) and first["pid"] != second["pid"]
    assert {first["pid"], second["pid"]} == {w["pid"] for w in warmed["a"]} and first["warm_s"] >= 1.0
    # none left of key a, and key b's only child died warming up: the caller runs those in a fresh child
    assert spares.call("a", {"n": 3}) is None and spares.call("b", {"n": 4}) is None
    spares.start("c", "c")
    spares.close()  # a child no request took ends with its stdin
    assert spares.call("c", {"n": 5}) is None


def test_serve_all_keeps_its_children_for_a_later_call_when_asked():
    kept: dict = {}
    argv = child.python("-c", SERVER)
    first = child.serve_all(
        argv, {"a": [{"n": 1}], "b": [{"n": 2}]}, warm={"a": {"warm": "a"}, "b": {"warm": "b"}}, timeout=60, kept=kept
    )
    assert sorted(kept) == ["a", "b"] and all(s.proc.poll() is None for s in kept.values())  # still running
    kept["b"].proc.kill()  # one dies while it waits
    kept["b"].proc.wait()
    later = child.serve_all(
        argv,
        {"a": [{"n": 3}, {"n": 4}], "b": [{"n": 5}]},
        warm={"a": {"warm": "a"}, "b": {"warm": "b"}},
        timeout=60,
        kept=kept,
    )
    # a's child served both calls, with no second warm-up; b's dead child was replaced by a fresh, warmed one
    assert later["a"][0]["pid"] == later["a"][1]["pid"] == first["a"][0]["pid"] and "warm" not in later["a"][0]
    assert [a["twice"] for a in later["a"]] == [6, 8] and later["b"][0]["twice"] == 10
    assert later["b"][0]["pid"] != first["b"][0]["pid"] and later["b"][0]["warm"]["status"] == "ok"
    procs = [s.proc for s in kept.values()]
    child.close_kept(kept)
    assert kept == {} and all(p.poll() is not None for p in procs)  # ended
    # without `kept` a child ends once its requests are answered
    assert child.serve_all(argv, {"c": [{"n": 6}]}, timeout=60)["c"][0]["twice"] == 12


def test_serve_all_with_no_request_starts_and_warms_children_for_a_later_call():
    kept: dict = {}
    argv = child.python("-c", SERVER)
    assert child.serve_all(argv, {"a": [], "b": []}, warm={"a": {"warm": "a"}, "b": {"warm": "b"}}, kept=kept) == {
        "a": [],
        "b": [],
    }
    assert sorted(kept) == ["a", "b"] and all(s.proc.poll() is None for s in kept.values())  # warmed, waiting
    pids = {k: s.proc.pid for k, s in kept.items()}
    later = child.serve_all(argv, {"a": [{"n": 1}], "b": [{"n": 2}]}, warm={"a": {"warm": "a"}}, kept=kept)
    # the children started before served the requests, with no warm-up answer mistaken for a request's
    assert {k: (v[0]["pid"], v[0]["twice"]) for k, v in later.items()} == {"a": (pids["a"], 2), "b": (pids["b"], 4)}
    child.close_kept(kept)
