"""The class cost model (rvvkit/measure/cost_table.py, class_model.py and the K1's
toolchain/cost/x60.toml): the table covers every class the plugin reports, and hand-computed
mixes give the cycles and times the model's rules say. No QEMU."""
import re

import pytest

from rvvkit.errors import RvvkitError
from rvvkit.measure import class_model, cost_table, cycle_model as cm
from rvvkit.resources import toolchain_dir

X60 = cost_table.cost_table("x60")
K1 = cm.board_model("k1")


def plugin_class_names():
    """CLS_NAMES of the class-counting plugin's sources (the .c or a header beside it): what
    it can report."""
    folder = toolchain_dir() / "qemu_plugin"
    src = "".join(p.read_text() for p in sorted(folder.glob("*.[ch]")))
    found = re.search(r"CLS_NAMES\[N_CLS\]\s*=\s*\{(.*?)\};", src, re.S)
    assert found, "no CLS_NAMES table in toolchain/qemu_plugin/"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_every_class_the_plugin_reports_has_a_cost():
    names = plugin_class_names()
    assert len(names) == 26 and set(names) == set(cost_table.PLUGIN_CLASSES)
    for cls in names:
        for key in ("m1.e32", "m8.e8", "mf2.e16", "m?.e?", "-"):
            assert X60.occupancy(cls, key) > 0, (cls, key)


def test_x60_rows_restate_the_llvm_model():
    # DLEN = VLEN / 2: a single-width integer op holds the vector integer unit 2 cycles a
    # register, float multiply-add 1 (WriteVIALU*, WriteVFMulAddV)
    assert (X60.vlen, X60.dlen, X60.issue_width) == (256, 128, 2)
    assert [X60.occupancy("valu", f"m{n}.e32") for n in (1, 2, 4, 8)] == [2, 4, 8, 16]
    assert [X60.occupancy("vfma", f"m{n}.e32") for n in (1, 2, 4, 8)] == [1, 2, 4, 8]
    assert X60.pipe("vfma") == "vfp" and X60.pipe("valu") == "vieu"
    # strided loads: one cycle per element of VLMAX = VLEN x LMUL / EEW; indexed half
    assert X60.occupancy("vload.strided", "m2.e32") == 16
    assert X60.occupancy("vload.indexed", "m2.e8") == 32
    assert X60.occupancy("vload.unit", "m4.e32") == 8
    assert X60.exposed_latency("vred", "m1.e32") == 7
    assert X60.exposed_latency("vfma", "m1.e32") == 0      # not exposed


def test_hand_computed_mix():
    # one core: 1000 scalar ints (ieu, 2 units: 500), 300 m1 loads (vls 900), 400 m2 float
    # FMAs (vfp 800), 10 vmv.x.s (vieu 60, exposed 60); 1710 insns / 2 = 855 issue cycles
    mix = {"int": {"-": 1000}, "vload.unit": {"m1.e32": 300}, "vfma": {"m2.e32": 400},
           "vmove.scalar": {"m1.e32": 10}}
    c = class_model.class_cycles(mix, X60)
    assert c["issue_cycles"] == 855
    assert c["pipe_cycles"]["vls"] == 900 and c["pipe_cycles"]["vfp"] == 800
    assert c["pipe_cycles"]["ieu"] == 500 and c["pipe_cycles"]["vieu"] == 60
    assert c["bound_by"] == "vls" and c["exposed_cycles"] == 60
    assert c["cycles"] == 960
    step = class_model.modelled_step(mix, X60, 1.6)
    assert step["compute_ms"] == pytest.approx(960 / 1.6e6)
    assert step["bound"] == "compute" and step["memory_ms"] == 0
    # two threads with a 3:1 split: the busier thread sets the time
    two = class_model.modelled_step(mix, X60, 1.6, shares=[0.75, 0.25])
    assert two["compute_ms"] == pytest.approx(0.75 * 960 / 1.6e6)


def test_memory_term_dominates_a_streaming_step_and_cores_share_the_bus():
    mem = K1.memory
    assert mem.bytes_per_s(1) == pytest.approx(10.66e9 * 0.40)
    # two cores would pull 2 x 4.26 GB/s: more than the bus gives all of them together
    assert mem.bytes_per_s(2) == mem.bytes_per_s(8) == pytest.approx(10.66e9 * 0.65)
    # a GEMV-like step: 1e6 cycles of work, 100 MB of weights
    mix = {"vload.unit": {"m1.e8": 300_000}, "vwfma": {"m1.e8": 200_000}}
    one = class_model.modelled_step(mix, X60, 1.6, mem, 100e6)
    assert one["compute_ms"] == pytest.approx(900_000 / 1.6e6)
    assert one["memory_ms"] == pytest.approx(100e6 / (10.66e9 * 0.40) * 1e3)
    assert one["bound"] == "memory" and one["modelled_ms"] == one["memory_ms"]
    few = class_model.modelled_step(mix, X60, 1.6, mem, 1e3)       # 1 kB: compute bound
    assert few["bound"] == "compute" and few["modelled_ms"] == few["compute_ms"]
    with pytest.raises(RvvkitError, match="memory term"):
        class_model.modelled_step(mix, X60, 1.6, None, 1e3)


def test_classes_fields_and_boards_without_a_cost_table():
    mix = {"vfma": {"m1.e32": 1600}}
    row = cm.classes_fields(mix, K1, run_vlen=256)
    assert row["class_model_cycles"] == 1600 and row["bound_by"] == "vfp"
    assert row["class_model_ms"] == pytest.approx(1e-3)
    assert row["class_model"].startswith("k1 (SpacemiT X60")
    assert cm.classes_fields(mix, K1, run_vlen=128)["class_model_ms"] is None
    coarse = cm.CycleModel("old", 256, 256, 1.6)
    with pytest.raises(RvvkitError, match="no cost table"):
        cm.classes_fields(mix, coarse, run_vlen=256)
    with pytest.raises(RvvkitError, match=r"k230.toml \[model\] is missing"):
        cm.board_model("k230")
    with pytest.raises(RvvkitError, match="no cost table 'z99'"):
        cost_table.cost_table("z99")


def test_a_table_missing_a_class_is_refused(tmp_path, monkeypatch):
    text = (toolchain_dir() / "cost" / "x60.toml").read_text()
    cut = text.replace('[classes."vmove.whole"]', '[classes."vmove.hole"]')
    (tmp_path / "cost").mkdir()
    (tmp_path / "cost" / "cut.toml").write_text(cut)
    monkeypatch.setattr(cost_table, "toolchain_dir", lambda: tmp_path)
    with pytest.raises(RvvkitError, match="no cost for plugin classes vmove.whole"):
        cost_table.cost_table("cut")
