"""Work done in a child Python process, its answer read back as data (the import check, the isolated decoder,
the benchmarks' jobs).

Some libraries cannot share a process (PyNvVideoCodec's bundled FFmpeg breaks TorchCodec once both are
loaded), some crash or hang on bad input, and a measurement needs a fresh process. The child prints one JSON
object per answer on its stdout (`answer`); the parent (`call`, `serve`) reads them back. Every answer has a
'status', one of `OUTCOMES`:

    ok           the work was done; the answer carries its result
    unavailable  our `BackendUnavailable`: the library, device or file trait is refused
    error        an exception: `DecodeError` (ours) or a library's own exception that reached the child's top

An 'unavailable' or 'error' answer carries 'error' (the exception's type and message), 'cause' (what went
wrong, without the file and backend the caller already knows) and 'exception' (the type's name).
    crashed      the child died without an answer: 'error' holds its exit status and last line of stderr
    timeout      no answer within the time limit
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from playbook_utils.errors import BackendUnavailable, DecodeError, first_line, last_line

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
            "error": f"{type(e).__name__}: {e}"[:400],
            "cause": e.cause,
            "exception": type(e).__name__,
        }
    except BaseException as e:  # a library's own exception, reported as data
        message = f"{type(e).__name__}: {first_line(e)}"[:400]
        return {"status": "error", "error": message, "cause": message, "exception": type(e).__name__}
    out = dict(result) if isinstance(result, dict) else {"result": result}
    return {"status": "ok", "error": None, **out}


def reply(fn, *args, **kwargs) -> None:
    """`answer` printed as one JSON line on stdout: the last thing a child's `__main__` does."""
    print(json.dumps(answer(fn, *args, **kwargs)), flush=True)


def _env(env: dict | None) -> dict:
    return {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}


def _answers(text) -> list[dict]:
    text = text.decode(errors="replace") if isinstance(text, bytes) else (text or "")
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _died(run_or_error, timeout: float) -> dict:
    """The answer for a child that gave none: 'timeout', or 'crashed' with its exit status and last stderr line."""
    if isinstance(run_or_error, subprocess.TimeoutExpired):
        return {"status": "timeout", "error": f"the child process gave no answer within {timeout:.0f} s"}
    return {
        "status": "crashed",
        "error": f"the child process died (exit {run_or_error.returncode}): {last_line(run_or_error.stderr)[:300]}",
    }


def python(*args: str) -> list[str]:
    """The command line that runs this interpreter with `args` (`-m module ...` or `-c code ...`)."""
    return [sys.executable, *args]


def call(argv: list[str], timeout: float = 600, env: dict | None = None) -> dict:
    """Run `argv` (see `python`) and return its last JSON answer, or a 'crashed' / 'timeout' answer (never
    raises for the child's failure). `env`: the child's environment (default: this one's; the decoding children get
    `decoders.child_env()`)."""
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(env))
    except subprocess.TimeoutExpired as e:
        return _died(e, timeout)
    found = _answers(run.stdout)
    return found[-1] if found else _died(run, timeout)


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
        except subprocess.TimeoutExpired as e:
            proc.kill()
            proc.communicate()
            out[key] = _died(e, timeout)
            continue
        found = _answers(stdout)
        out[key] = (
            found[-1]
            if found
            else _died(subprocess.CompletedProcess(argvs[key], proc.returncode, stdout, stderr), timeout)
        )
    return out


def serve(
    argv: list[str], requests: list[dict], timeout: float = 300, env: dict | None = None, on_answer=None
) -> list[dict]:
    """Send `requests` to one child `argv` (one JSON line each on its stdin; it answers one line per request, in
    order) and return one answer per request. Each request gets `timeout` seconds; `on_answer(request, answer)`
    is called as each answer arrives (a progress bar). When the child dies or runs out of time, the request it
    was on gets a 'crashed' or 'timeout' answer and a new child serves the rest. Each answer gets 'served_s': the
    seconds since the answer before it (for a child's first, since the child was started: its start-up is in it)."""
    import queue
    import threading
    import time

    results: list[dict] = []
    pending = list(requests)
    while pending:
        last = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(env),
        )
        lines: queue.Queue = queue.Queue()
        err: list[str] = []
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True).start()
        reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
        reader.start()
        try:
            proc.stdin.write("".join(json.dumps(r) + "\n" for r in pending))
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        failure = None
        while pending and failure is None:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                proc.kill()
                failure = _died(subprocess.TimeoutExpired(argv, timeout), timeout)
                break
            if line is None:  # the child ended before answering every request
                proc.wait()
                reader.join(timeout=5)
                failure = _died(subprocess.CompletedProcess(argv, proc.returncode, "", "".join(err)), timeout)
                break
            found = _answers(line)
            if found:
                now = time.perf_counter()
                found[0]["served_s"], last = now - last, now
                results.append(found[0])
                if on_answer:
                    on_answer(pending[0], found[0])
                pending.pop(0)
        if failure is not None and pending:
            results.append(failure)
            if on_answer:
                on_answer(pending[0], failure)
            pending.pop(0)
        proc.wait()
    return results


def serve_requests(handle) -> None:
    """The child's side of `serve`: answer each JSON line of stdin with `reply(handle, request)`."""
    for line in sys.stdin:
        if line.strip():
            reply(handle, json.loads(line))
