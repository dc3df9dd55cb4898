"""The runner's greedy pick (runtime_c/rvk_generate.h rvk_gen_argmax), compiled on its own:
the first index of the largest logit, NaNs passed over, ties to the lowest index, for lengths
around its 16-lane and 64-element blocks."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

HEADER = Path(__file__).resolve().parents[3] / "runtime_c" / "rvk_generate.h"

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    long n;
    while (scanf("%ld", &n) == 1) {
        float *row = (float *)malloc(sizeof(float) * (size_t)n);
        for (long i = 0; i < n; ++i) {
            unsigned u;
            if (scanf("%x", &u) != 1) return 2;
            memcpy(&row[i], &u, sizeof u);
        }
        printf("%ld\n", rvk_gen_argmax(row, n));
        free(row);
    }
    return 0;
}
"""


def one_pass(row: np.ndarray) -> int:
    """The scan it replaced: the first strictly larger logit wins; NaN never does."""
    best = 0
    for i in range(1, len(row)):
        if row[i] > row[best]:
            best = i
    return best


@pytest.fixture(scope="module")
def argmax_exe(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    text = HEADER.read_text()
    start = text.index("enum { RVK_ARGMAX_LANES")
    end = text.index("\n}\n", text.index("static long rvk_gen_argmax")) + 3
    src = tmp_path_factory.mktemp("argmax") / "argmax.c"
    src.write_text("#include <string.h>\n" + text[start:end] + MAIN)
    exe = src.with_suffix("")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", str(src), "-o",
                    str(exe)], check=True)
    return exe


def rows():
    rng = np.random.default_rng(3)
    for n in (1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000):
        yield rng.standard_normal(n).astype(np.float32)
        yield rng.integers(-3, 4, n).astype(np.float32)          # many ties
    tied = np.zeros(200, np.float32)
    tied[[70, 150]] = 5.0
    yield tied
    nan = np.arange(100, dtype=np.float32)
    nan[[30, 99]] = np.nan
    yield nan                                                    # NaN last: passed over
    yield np.array([np.nan, 1.0, 2.0], np.float32)               # NaN first wins
    zeros = np.array([-0.0, 0.0, -1.0] * 30, np.float32)         # -0 and +0 tie
    yield zeros
    yield np.full(80, -np.inf, np.float32)


def test_argmax_matches_the_one_pass_scan(argmax_exe):
    cases = list(rows())
    text = "".join(f"{len(r)} " + " ".join(f"{u:08x}" for u in r.view(np.uint32)) + "\n"
                   for r in cases)
    out = subprocess.run([str(argmax_exe)], input=text, capture_output=True, text=True,
                         check=True).stdout.split()
    assert [int(x) for x in out] == [one_pass(r) for r in cases]
