"""A core's cost table (toolchain/cost/<name>.toml): per instruction class of the counting
plugin (rvvkit.runtime.counting.iclass), the pipe it occupies and for how many cycles by LMUL (and
element width, for strided and indexed memory), and the latency the scalar core waits for
where the table marks a class `exposed`. Loaded and checked here; used by class_model."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping, Tuple

from ..errors import RvvkitError
from ..resources import load_toml, toolchain_dir

# Every class qemu_iclass.c can report (its CLS_NAMES): a table must cost each one.
PLUGIN_CLASSES = (
    "vset", "vload.unit", "vload.strided", "vload.indexed", "vstore.unit", "vstore.strided",
    "vstore.indexed", "vmem.whole", "vmem.mask", "vfma", "vima", "vwfma", "vwiden", "vnarrow",
    "vred", "vperm", "vmove.scalar", "vmask", "vmove.whole", "valu", "vfwfma",
    "int", "fp", "mem", "branch", "other")
LMULS = ("mf8", "mf4", "mf2", "m1", "m2", "m4", "m8")
_LMUL_VALUE = dict(zip(LMULS, (0.125, 0.25, 0.5, 1, 2, 4, 8)))


@dataclass(frozen=True)
class ClassCost:
    pipe: str
    occupancy: Tuple[float, ...]      # by LMULS; empty when per_element is used
    per_element: float = 0.0          # cycles per element of VLMAX (strided, indexed)
    latency: Tuple[float, ...] = ()
    exposed: bool = False             # the latency adds to the thread's time


@dataclass(frozen=True)
class CostTable:
    name: str
    source: str                       # the file it came from
    vlen: int
    dlen: int
    issue_width: int
    pipes: Mapping[str, int]
    classes: Mapping[str, ClassCost]

    def occupancy(self, cls: str, key: str) -> float:
        """Cycles one instruction of `cls` holds its pipe, for a plugin key "m4.e32" (LMUL and
        SEW, or for memory the element width; "m?"/"e?" when unknown: costed at m1/e8)."""
        c = self._class(cls)
        lmul, sew = _parse_key(key)
        if c.per_element:
            bits = 8 if sew is None else sew
            return c.per_element * max(1.0, self.vlen * _LMUL_VALUE[lmul] / bits)
        return c.occupancy[LMULS.index(lmul)]

    def pipe(self, cls: str) -> str:
        return self._class(cls).pipe

    def exposed_latency(self, cls: str, key: str) -> float:
        c = self._class(cls)
        if not c.exposed:
            return 0.0
        return c.latency[LMULS.index(_parse_key(key)[0])]

    def _class(self, cls: str) -> ClassCost:
        try:
            return self.classes[cls]
        except KeyError:
            raise RvvkitError(f"{self.source}: no cost for instruction class {cls!r}") from None


def _parse_key(key: str):
    """("m4", 32) of "m4.e32"; "-" (scalar) and unknown parts read as ("m1", None)."""
    lmul, _, sew = key.partition(".")
    lmul = lmul if lmul in _LMUL_VALUE else "m1"
    width = sew[1:] if sew.startswith("e") else ""
    return lmul, int(width) if width.isdigit() else None


def _by_lmul(value: Any, where: str) -> Tuple[float, ...]:
    """A per-LMUL list (mf8 .. m8) from a list of 7 or one number for all."""
    if isinstance(value, (int, float)):
        return (float(value),) * len(LMULS)
    if isinstance(value, list) and len(value) == len(LMULS) and \
            all(isinstance(v, (int, float)) and v >= 0 for v in value):
        return tuple(float(v) for v in value)
    raise RvvkitError(f"{where}: needs a number or a list of {len(LMULS)} numbers "
                      f"({', '.join(LMULS)}), not {value!r}")


def _class_cost(name: str, row: Mapping[str, Any], pipes, where: str) -> ClassCost:
    where = f"{where} [classes.{name}]"
    pipe = row.get("pipe")
    if pipe not in pipes:
        raise RvvkitError(f"{where}: pipe {pipe!r} is not one of [pipes] ({', '.join(pipes)})")
    per_element = float(row.get("per_element", 0.0))
    if ("occupancy" in row) == bool(per_element):
        raise RvvkitError(f"{where}: needs either occupancy or per_element")
    occupancy = _by_lmul(row["occupancy"], where) if "occupancy" in row else ()
    latency = _by_lmul(row["latency"], where) if "latency" in row else ()
    exposed = bool(row.get("exposed", False))
    if exposed and not latency:
        raise RvvkitError(f"{where}: an exposed class needs a latency")
    return ClassCost(pipe, occupancy, per_element, latency, exposed)


@functools.lru_cache(maxsize=None)
def cost_table(name: str) -> CostTable:
    """toolchain/cost/<name>.toml, checked: every plugin class has a cost on a known pipe."""
    path = toolchain_dir() / "cost" / f"{name}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.toml"))
        raise RvvkitError(f"no cost table {name!r} in {path.parent} (known: "
                          f"{', '.join(known) or 'none'})")
    doc = load_toml(path, "cost table")
    where = f"toolchain/cost/{name}.toml"
    try:
        pipes = {str(k): int(v) for k, v in doc["pipes"].items()}
        rows = doc["classes"]
        classes = {c: _class_cost(c, rows[c], pipes, where) for c in rows}
        table = CostTable(str(doc["name"]), where, int(doc["vlen"]), int(doc["dlen"]),
                          int(doc["issue_width"]), pipes, classes)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RvvkitError(f"{where}: needs name, vlen, dlen, issue_width, [pipes] and "
                          f"[classes.*] ({exc!r})") from None
    missing = [c for c in PLUGIN_CLASSES if c not in classes]
    if missing:
        raise RvvkitError(f"{where}: no cost for plugin classes {', '.join(missing)}")
    if tuple(doc.get("lmuls", LMULS)) != LMULS or min(pipes.values()) < 1:
        raise RvvkitError(f"{where}: lmuls must be {list(LMULS)} and every pipe at least 1")
    return table
