"""The error metrics of `rvvkit compare` (rvvkit.measure.scoring): definitions, edge cases, and that
everything they return is JSON-safe."""
import json

import numpy as np

from rvvkit.measure.scoring import score, score_output

TOL = {"rtol": 1e-3, "atol": 1e-4}


def test_abs_and_rel_errors_with_floor():
    ref = np.array([[1000.0, 0.0, -2.0]], np.float32)
    out = ref + np.array([[0.5, 1e-4, 0.0]], np.float32)
    s = score_output("y", out, ref, **TOL)
    assert s["max_abs_err"] == np.float32(1000.5) - 1000.0  # what float32 holds
    # the element at 0 is measured against 1e-6 * max|ref| = 1e-3, not against 0
    assert abs(s["max_rel_err"] - 1e-4 / 1e-3) < 1e-6
    assert s["tolerance"] == 1e-4 + 1e-3 * 1000.0
    assert s["matched"] and s["problem"] is None


def test_mismatch_and_non_finite():
    ref = np.zeros((1, 4), np.float32)
    s = score_output("y", ref + 1, ref, **TOL)
    assert not s["matched"] and "max abs error 1 > tolerance 0.0001" in s["problem"]
    bad = ref.copy()
    bad[0, 2] = np.nan
    s = score_output("y", bad, ref, **TOL)
    assert not s["matched"] and s["max_abs_err"] is None and "non-finite" in s["problem"]
    same_nan = score_output("y", bad, bad.copy(), **TOL)  # NaN where the reference has NaN
    assert same_nan["matched"] and same_nan["max_abs_err"] == 0


def test_shape_and_missing_outputs():
    ref = np.zeros((2, 3), np.float32)
    assert "shape [3, 2]" in score_output("y", np.zeros((3, 2)), ref, **TOL)["problem"]
    row = score({}, {"y": ref}, **TOL)
    assert row["status"] == "mismatch" and row["reason"] == "y: output missing"


def test_argmax_only_for_class_scores():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 10)).astype(np.float32)
    flipped = logits.copy()
    flipped[1] = -flipped[1]
    assert score_output("y", flipped, logits, **TOL)["argmax"] == {"matched": 3, "rows": 4}
    assert score_output("y", logits[0], logits[0], **TOL)["argmax"] == {"matched": 1, "rows": 1}
    squeezed = logits.reshape(4, 1, 1, 10)
    assert score_output("y", squeezed, squeezed, **TOL)["argmax"]["rows"] == 4
    fmap = rng.standard_normal((1, 8, 5, 5)).astype(np.float32)
    assert score_output("y", fmap, fmap, **TOL)["argmax"] is None
    head = rng.standard_normal((1, 1000, 1, 1)).astype(np.float32)   # SqueezeNet's conv head
    assert score_output("y", head, head, **TOL)["argmax"] == {"matched": 1, "rows": 1}


def test_overall_row_is_worst_output_and_json_safe():
    a = np.ones((1, 3), np.float32)
    b = np.full((1, 3), 100.0, np.float32)
    row = score({"a": a + 1e-5, "b": b + 0.05}, {"a": a, "b": b}, **TOL)
    assert row["status"] == "ok"
    assert abs(row["max_abs_err"] - 0.05) < 1e-5
    assert row["argmax"] == {"matched": 2, "rows": 2}
    nan = score({"a": a * np.nan, "b": b}, {"a": a, "b": b}, **TOL)
    assert nan["max_abs_err"] is None and nan["status"] == "mismatch"
    json.dumps(nan, allow_nan=False)


def test_half_outputs_are_scored_at_half_precision():
    """A float16 reference rounds after its operators: 3 ulps of half off is a match there,
    and the same numbers in float32 are not."""
    ref = np.linspace(-8, 8, 64).astype(np.float16)
    out = (ref.astype(np.float32) + 3 * np.spacing(np.float16(8))).astype(np.float16)
    assert score_output("y", out, ref, rtol=1e-3, atol=1e-4)["matched"]
    far = score_output("y", out.astype(np.float32), ref.astype(np.float32), rtol=1e-3,
                               atol=1e-4)
    assert not far["matched"]
