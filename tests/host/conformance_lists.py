"""GENERATED: do not edit by hand. Regenerate with
    python3 benchmarks/conformance.py --write-lists tests/host/conformance_lists.py"""

NOT_YET = {}

QEMU_SAMPLE = []
