"""The board cycle model of `rvvkit bench` (rvvkit/measure/cycle_model.py): its arithmetic on
per-thread counts, and the [model] table it reads from toolchain/boards/. No QEMU."""
import pytest

from rvvkit.measure import cycle_model as cm
from rvvkit.errors import RvvkitError
from rvvkit.jit import targets


def thread(vcpu, insns, vector=0, weighted=0):
    return {"vcpu": vcpu, "insns": insns, "vector_insns": vector, "vsetvl": 0,
            "lmul_weighted_vector_ops": weighted, "vector_insns_unknown_lmul": 0}


K1 = cm.CycleModel("k1", vlen=256, datapath_bits=256, frequency_ghz=1.6)
K1_PRESET = cm.board_model("k1")
HALF = cm.CycleModel("half", vlen=256, datapath_bits=128, frequency_ghz=2.0)


def test_k1_model_is_read_from_the_board_preset():
    assert cm.board_model() == K1_PRESET
    assert (K1_PRESET.vlen, K1_PRESET.frequency_ghz, K1_PRESET.cost) == (256, 1.6, "x60")
    # no datapath_bits in the preset: the cost table's DLEN (LLVM's X60 model: VLEN / 2)
    assert K1_PRESET.datapath_bits == K1_PRESET.table.dlen == 128
    assert K1_PRESET.memory.peak_gb_s == 10.66 and K1_PRESET.memory.cores == 8
    assert targets.board_preset("k1")["model"]["vlen"] == targets.board_preset("k1")["vlen"]


def test_a_board_without_a_model_or_an_unknown_one_is_an_error():
    with pytest.raises(RvvkitError, match=r"k230.toml \[model\] is missing"):
        cm.board_model("k230")
    with pytest.raises(RvvkitError, match="no board preset 'k9'"):
        cm.board_model("k9")


def test_thread_cost_scalar_one_cycle_vector_lmul_times_vlen_over_datapath():
    # 1000 instructions, 200 of them vector with LMUL-weighted sum 800 (e.g. 200 at LMUL 4)
    t = thread(0, 1000, 200, 800)
    assert cm.weighted_instructions(t) == 800 + 800
    assert cm.thread_cycles(t, K1) == 800 + 800 * 1       # 256 / 256: LMUL cycles
    assert cm.thread_cycles(t, HALF) == 800 + 800 * 2     # 256 / 128: 2 x LMUL cycles


def test_modelled_time_is_the_slowest_thread_and_may_differ_from_the_critical_path():
    scalar_heavy = thread(0, 1000)              # weighted 1000, cycles 1000 on either model
    vector_heavy = thread(1, 600, 500, 500)     # weighted 600, cycles 100 + 500 * 2 on HALF
    threads = [scalar_heavy, vector_heavy]
    k1 = cm.modelled(threads, K1)
    assert k1 == {"critical_path_instructions": 1000, "modelled_cycles": 1000,
                  "modelled_ms": pytest.approx(1000 / 1.6e6)}
    half = cm.modelled(threads, HALF)
    assert half["critical_path_instructions"] == 1000      # the scalar thread ...
    assert half["modelled_cycles"] == 1100                 # ... but the vector one is slower
    assert half["modelled_ms"] == pytest.approx(1100 / 2.0e6)
    assert cm.modelled([], K1)["modelled_cycles"] == 0


def test_bench_fields():
    counts = {"per_thread": [thread(0, 400, 10, 40), thread(1, 300, 100, 800)],
              "per_thread_overflow": None}
    row = cm.bench_fields(counts, K1, run_vlen=256)
    assert row["per_thread_instructions"] == [400, 300]
    assert row["critical_path_instructions"] == 1000                 # 200 + 800, thread 1
    assert row["modelled_cycles"] == 1000
    assert row["modelled_ms"] == pytest.approx(1000 / 1.6e6)
    assert row["cycle_model"].startswith("k1 (VLEN 256, 256-bit datapath, 1.6 GHz")
    # counts of a run at another VLEN are of other code: no modelled time for the board
    other = cm.bench_fields(counts, K1, run_vlen=128)
    assert other["critical_path_instructions"] == 1000
    assert other["modelled_cycles"] is other["modelled_ms"] is None
    # threads past the plugin's table are merged: no per-thread maximum can be trusted
    merged = dict(counts, per_thread_overflow=dict(thread(256, 5000), first_vcpu=256))
    row = cm.bench_fields(merged, K1, run_vlen=256)
    assert row["per_thread_overflow_instructions"] == 5000
    assert row["critical_path_instructions"] is row["modelled_cycles"] is None
