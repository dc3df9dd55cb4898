"""Package list for setuptools (everything else is in pyproject.toml): the Python packages under
rvvkit/, plus the data packages that pyproject.toml maps onto the top-level runtime_c/ and
toolchain/ folders. Listed here because pyproject's `packages.find` cannot add packages that
live outside the folders it searches."""
from setuptools import find_packages, setup

DATA_PACKAGES = ["rvvkit._runtime_c", "rvvkit._toolchain"]

setup(packages=find_packages(include=["rvvkit", "rvvkit.*"]) + DATA_PACKAGES)
