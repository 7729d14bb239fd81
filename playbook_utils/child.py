"""Work done in a child Python process, its answer read back as data (the import check, the isolated decoder, the
benchmarks' jobs). The child prints one JSON answer per line (`answer`); the parent (`call`, `serve`) reads them
back. Each answer's 'status' is one of `OUTCOMES`: ok, unavailable (`BackendUnavailable`), error (an exception),
crashed (the child died without an answer) or timeout."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time

from playbook_utils.errors import BackendUnavailable, DecodeError, clipped, first_line, last_line

__all__ = [
    "answer",
    "call",
    "call_all",
    "close_kept",
    "OURS",
    "OUTCOMES",
    "python",
    "reply",
    "serve",
    "serve_all",
    "serve_requests",
    "Spares",
]

OUTCOMES = ("ok", "unavailable", "error", "crashed", "timeout")
OURS = ("DecodeError", "BackendUnavailable")  # the exception names `errors` defines


def answer(fn, *args, **kwargs) -> dict:
    """Run `fn(*args, **kwargs)` (in the child) and return its answer: {'status': 'ok', **result} for a dict
    result, else {'status': 'ok', 'result': result}; an exception becomes an 'unavailable' or 'error' answer
    with its message and type name. Nothing is raised: the child exists to report."""
    try:
        result = fn(*args, **kwargs)
    except (BackendUnavailable, DecodeError) as e:
        return {
            "status": "unavailable" if isinstance(e, BackendUnavailable) else "error",
            "error": clipped(f"{type(e).__name__}: {e}"),
            "cause": e.cause,
            "exception": type(e).__name__,
        }
    except BaseException as e:  # a library's own exception, reported as data
        message = clipped(f"{type(e).__name__}: {first_line(e)}")
        return {"status": "error", "error": message, "cause": message, "exception": type(e).__name__}
    out = dict(result) if isinstance(result, dict) else {"result": result}
    return {"status": "ok", "error": None, **out}


def reply(fn, *args, **kwargs) -> None:
    """`answer` printed as one JSON line on stdout: the last thing a child's `__main__` does."""
    print(json.dumps(answer(fn, *args, **kwargs)), flush=True)


def _env(env: dict | None) -> dict:
    return {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}


def _answers(text: str | None) -> list[dict]:
    out = []
    for line in (text or "").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _timed_out(timeout: float) -> dict:
    """The answer for a child that gave none within `timeout` seconds."""
    return {"status": "timeout", "error": f"the child process gave no answer within {timeout:.0f} s"}


def _crashed(returncode: int, stderr) -> dict:
    """The answer for a child that died without one: its exit status and the last line of its stderr."""
    last = clipped(last_line(stderr), 300)
    return {"status": "crashed", "error": f"the child process died (exit {returncode}): {last}"}


def python(*args: str) -> list[str]:
    """The command line that runs this interpreter with `args` (`-m module ...` or `-c code ...`)."""
    return [sys.executable, *args]


def call(argv: list[str], timeout: float = 600, env: dict | None = None) -> dict:
    """Run `argv` (see `python`) and return its last JSON answer, or a 'crashed' / 'timeout' answer (never
    raises for the child's failure). `env`: the child's environment (default: this one's; the decoding children get
    `decoders.child_env()`)."""
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(env))
    except subprocess.TimeoutExpired:
        return _timed_out(timeout)
    found = _answers(run.stdout)
    return found[-1] if found else _crashed(run.returncode, run.stderr)


def call_all(argvs: dict, timeout: float = 600, env: dict | None = None) -> dict:
    """`call` for several children at once, side by side: {key: argv} in, {key: answer} out. For work whose
    children each watch only themselves (a soak of one backend's memory), so the batch takes as long as its
    slowest child."""
    procs = {
        k: subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(env))
        for k, a in argvs.items()
    }
    out = {}
    for key, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[key] = _timed_out(timeout)
            continue
        found = _answers(stdout)
        out[key] = found[-1] if found else _crashed(proc.returncode, stderr)
    return out


class _Server:
    """One serving child (`serve`): `argv` started now, its stdin left open for requests, its stdout's lines
    read by a thread into a queue and its stderr kept, so that neither pipe fills while the parent waits."""

    def __init__(self, argv: list[str], env: dict | None):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(env)
        )
        self.lines: queue.Queue = queue.Queue()
        self.err: list[str] = []
        out = self.proc.stdout
        threading.Thread(target=lambda: [self.lines.put(x) for x in out] + [self.lines.put(None)], daemon=True).start()
        self.reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def send(self, requests: list[dict], last: bool = False) -> None:
        """Write `requests`, one JSON line each; `last`: close the child's stdin after them (it ends when done)."""
        with contextlib.suppress(OSError):  # a pipe broken by a child that ended: its answer says so
            self.proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
            self.proc.stdin.flush()
            if last:
                self.proc.stdin.close()

    def next(self, timeout: float) -> tuple[dict, bool]:
        """(the child's next answer, True), or (a 'timeout' or 'crashed' answer, False) when it gave none: a child
        that ran out of time is killed."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.proc.kill()
                return _timed_out(timeout), False
            if line is None:  # the child ended before answering
                self.proc.wait()
                self.reader.join(timeout=5)
                return _crashed(self.proc.returncode, "".join(self.err)), False
            found = _answers(line)
            if found:
                return found[0], True

    def warmed(self, timeout: float) -> tuple[dict, bool]:
        """`next`: the answer to the warm-up request sent first, with 'warm_s', the seconds since the child started."""
        found, ok = self.next(timeout)
        return {**found, "warm_s": round(time.perf_counter() - self.started, 3)}, ok

    def close(self) -> None:
        """Close its stdin and wait for it to end (killed after 30 s)."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve(
    argv: list[str],
    requests: list[dict],
    timeout: float = 300,
    env: dict | None = None,
    on_answer=None,
    server: _Server | None = None,
    keep: list | None = None,
) -> list[dict]:
    """Send `requests` to one child `argv`, one JSON line each; return one answer per request, each with 'served_s'.
    A request whose child dies or times out gets a 'crashed' or 'timeout' answer and a new child serves the rest.
    `server`: a child already warmed; `keep`: a list that gets the child, still running, once it has answered all."""
    results: list[dict] = []
    pending = list(requests)
    if not pending and server is not None and keep is not None:  # started and warmed for a later call
        keep.append(server)
    while pending:
        fresh = server is None
        proc = _Server(argv, env) if fresh else server
        server = None
        last = proc.started if fresh else time.perf_counter()
        proc.send(pending, last=keep is None)
        ok = True
        while pending:
            found, ok = proc.next(timeout)
            now = time.perf_counter()
            found["served_s"], last = now - last, now
            results.append(found)
            if on_answer:
                on_answer(pending[0], found)
            pending.pop(0)
            if not ok:
                break
        if ok and not pending and keep is not None:
            keep.append(proc)
        else:
            proc.close()
    return results


def serve_all(
    argv: list[str],
    groups: dict,
    warm: dict | None = None,
    timeout: float = 300,
    env: dict | None = None,
    on_answer=None,
    kept: dict | None = None,
) -> dict:
    """`serve` for one child per key of `groups` ({key: [request, ...]}): all started and warmed (`warm[key]`) side
    by side, then served one at a time. Returns {key: [answer, ...]}; each key's first answer holds 'warm_s' and
    'warm'. `kept` ({key: child}): children left running by an earlier call, reused and put back."""
    reused = {k for k in groups if kept and k in kept and kept[k].proc.poll() is None}  # still running
    servers = {k: kept.pop(k) if k in reused else _Server(argv, env) for k in groups}
    warmed = {}
    for k, s in servers.items():
        if k not in reused:
            s.send([warm[k]] if warm and k in warm else [])
    for k, s in servers.items():
        if warm and k in warm and k not in reused:
            warmed[k], ok = s.warmed(timeout)
            if not ok:
                servers[k] = None
    out = {}
    for k, requests in groups.items():
        left: list | None = [] if kept is not None else None
        answers = serve(argv, requests, timeout=timeout, env=env, on_answer=on_answer, server=servers.pop(k), keep=left)
        if left:
            kept[k] = left[0]
        if answers and k in warmed:
            answers[0]["warm_s"] = warmed[k].pop("warm_s")
            answers[0]["warm"] = warmed[k]
        out[k] = answers
    return out


def close_kept(kept: dict) -> None:
    """End the children `serve_all` kept running (`kept`), and forget them."""
    for server in kept.values():
        server.close()
    kept.clear()


class Spares:
    """Children started ahead and warmed side by side, each to serve one request and end (notebook 21's GPU-side
    loaders). `start(key, warm, count)`, `ready()`; `call(key, request)` returns the answer with 'warm_s', or None
    when no warmed child of `key` is left; `close()` ends the unused ones."""

    def __init__(self, argv: list[str], env: dict | None = None, timeout: float = 300):
        self.argv, self.env, self.timeout = argv, env, timeout
        self.idle: dict = {}  # key: [[server, warm answer or None], ...]

    def start(self, key, warm, count: int = 1) -> None:
        for _ in range(count):
            server = _Server(self.argv, self.env)
            server.send([{"warm": warm}])
            self.idle.setdefault(key, []).append([server, None])

    def _warmed(self, entry) -> dict:
        if entry[1] is None:
            entry[1], _ = entry[0].warmed(self.timeout)
        return entry[1]

    def ready(self) -> dict:
        """Wait for every child's warm-up; returns {key: [its children's warm-up answers]}."""
        return {key: [self._warmed(e) for e in entries] for key, entries in self.idle.items()}

    def call(self, key, request: dict, timeout: float | None = None) -> dict | None:
        entries = self.idle.get(key) or []
        while entries:
            entry = entries.pop(0)
            warm = self._warmed(entry)
            if warm.get("status") != "ok":
                entry[0].proc.kill()
                entry[0].close()
                continue
            server = entry[0]
            server.send([request], last=True)
            found, _ = server.next(timeout or self.timeout)
            server.close()
            return {**found, "warm_s": warm["warm_s"]}
        return None

    def close(self) -> None:
        for entries in self.idle.values():
            for server, _ in entries:
                server.close()
        self.idle = {}


def serve_requests(handle, warm=None) -> None:
    """The child's side of `serve`: answer each JSON line of stdin with `reply(handle, request)`; a request that
    holds the key 'warm' (`serve_all`'s) with `reply(warm, request['warm'])`."""
    for line in sys.stdin:
        if line.strip():
            request = json.loads(line)
            if isinstance(request, dict) and "warm" in request and warm is not None:
                reply(warm, request["warm"])
            else:
                reply(handle, request)
