"""What this host's CPU offers, for tests of the x86 branches of generated code."""


def host_has(*flags: str) -> bool:
    """Whether /proc/cpuinfo lists every one of `flags` (False where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return False
    return all(f" {x}" in text for x in flags)
