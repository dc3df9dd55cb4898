"""rvvkit.runtime.cuda_state: asking for a GPU does not initialise CUDA in this process, and a
child forked after its parent initialised CUDA says so, in one line, wherever it would use it."""
import os

import pytest

import rvvkit
from rvvkit.errors import ExecutionError
from rvvkit.runtime import cuda_state
from rvvkit.runtime.cuda import cuda_available

from conftest import make_model
from onnx import helper


def _in_child(fn) -> str:
    """fn()'s string result, computed in a forked child."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            os.write(wfd, str(fn()).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    out = b""
    while chunk := os.read(rfd, 4096):
        out += chunk
    os.close(rfd)
    os.waitpid(pid, 0)
    return out.decode()


def test_probing_does_not_initialise_cuda_here():
    cuda_available.cache_clear()
    ok, why = cuda_available()
    assert ok or why.startswith("no CUDA device: ")
    assert not cuda_state.initialised_here()


def test_a_child_forked_after_cuda_init_says_so(monkeypatch):
    monkeypatch.setattr(cuda_state, "_init_pid", os.getpid())
    parent = os.getpid()
    assert cuda_state.fork_error("x") is None   # the initialising process itself
    text = _in_child(lambda: cuda_available())
    assert f"forked from process {parent} after that process initialised CUDA" in text
    assert "no devices" not in text


def test_a_session_used_after_fork_says_so(monkeypatch):
    """The check of a GPU session, reached through an emulated one made to look like it."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [4])], ["y"])
    art = rvvkit.build(model)
    sess = rvvkit.load(art, on="cuda-emu")
    monkeypatch.setattr(sess, "emulate", False)
    monkeypatch.setattr(sess, "_pid", os.getpid() + 1)
    with pytest.raises(ExecutionError, match=r"this CUDA session was opened in process \d+ and "
                                             r"is used in process \d+, forked from it"):
        sess.run({"x": [1.0, -1.0, 2.0, 0.5]})
    monkeypatch.undo()
    sess.close()
