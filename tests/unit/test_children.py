"""rvvkit.children: the one way rvvkit starts programs, so that they end with it. end() (what
the command's signal handlers call) kills what runs in any thread and starts nothing more;
each thread hears of it once; a lifeline takes the child's whole group down when rvvkit dies
without a chance to clean up (SIGKILL)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from rvvkit import children


@pytest.fixture(autouse=True)
def _fresh():
    children.reset()
    yield
    children.reset()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def _wait_for(predicate, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _lifeline_of(parent: int) -> bool:
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[-1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if ppid == parent and b"rvvkit-lifeline" in f.read():
                    return True
        except (OSError, ValueError):
            pass
    return False


def _pid_in(path) -> int:
    assert _wait_for(lambda: path.exists() and path.read_text().strip()), "never started"
    return int(path.read_text())


def test_runs_like_subprocess_run():
    done = children.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out\n", b"err\n")
    merged = children.run(["sh", "-c", "echo out; echo err >&2"], merge_stderr=True)
    assert merged.stdout == b"out\nerr\n" and merged.stderr is None
    with pytest.raises(FileNotFoundError):
        children.run(["/nonexistent/cc"])


def test_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired) as exc:
        children.run(["sh", "-c", f"echo said; sleep 300 & echo $! > {pidfile}; wait"],
                     timeout=2)
    assert exc.value.output == b"said\n"  # what it printed before it was killed
    assert _wait_for(lambda: not _alive(_pid_in(pidfile)), 10), "the group outlived it"


def test_end_kills_a_child_of_another_thread_which_hears_of_it(tmp_path):
    pidfile = tmp_path / "pid"
    heard = []

    def work():
        try:
            children.run(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 300"])
        except children.Terminated as exc:
            heard.append(exc.signum)
    worker = threading.Thread(target=work)
    worker.start()
    pid = _pid_in(pidfile)
    children.end(signal.SIGTERM)
    worker.join(30)
    assert heard == [signal.SIGTERM] and not _alive(pid)
    assert isinstance(children.Terminated(signal.SIGTERM), KeyboardInterrupt)


def test_nothing_starts_once_ending(tmp_path):
    children.end(signal.SIGHUP)
    with pytest.raises(children.Terminated):
        children.run(["touch", str(tmp_path / "never")])
    assert not (tmp_path / "never").exists()


def test_each_thread_hears_once():
    children.check()  # not ending: nothing
    children.end(signal.SIGINT)
    with pytest.raises(children.Terminated):
        children.check()
    children.check()  # this thread is cleaning up now: let it
    heard = []

    def other():
        try:
            children.check()
        except children.Terminated:
            heard.append(True)
        children.check()
    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert heard == [True]


@pytest.mark.parametrize("join", [True, False], ids=["lifeline-first", "child-first"])
def test_lifeline_takes_the_group_down_when_rvvkit_is_killed(tmp_path, join):
    """SIGKILL runs no handler: the lifeline sees its pipe close and kills the child's group,
    a grandchild too (a compiler's cc1). Python 3.11 starts the lifeline first and the child
    in its group; older ones the child first, in a session of its own."""
    if join and not children._JOIN_GROUP:
        pytest.skip("Popen(process_group=...) needs Python 3.11")
    pidfile = tmp_path / "pid"
    script = ("from rvvkit import children\n"
              f"children._JOIN_GROUP = {join}\n"
              f"children.run(['sh', '-c', 'sleep 300 & echo $! > {pidfile}; wait'])\n")
    proc = subprocess.Popen([sys.executable, "-c", script])
    grandchild = _pid_in(pidfile)
    # Child first, the lifeline may still be starting: that moment is not what is tested.
    assert _wait_for(lambda: _lifeline_of(proc.pid)), "no lifeline"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _wait_for(lambda: not _alive(grandchild), 10), "the child outlived rvvkit"
