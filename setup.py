"""Package discovery (the rest of the metadata is in pyproject.toml).

Every package under rlvp_dsl/ and trainer/ is found, so a new folder can never be left
out of the wheel; the top-level grammars/ folder ships inside it as rlvp_dsl.grammars, and
the template folders (data only, no __init__.py) are named as the data packages they are.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["rlvp_dsl", "rlvp_dsl.*", "trainer", "trainer.*"])
    + ["rlvp_dsl.grammars", "rlvp_dsl.html.templates", "trainer.templates"],
    package_dir={"rlvp_dsl.grammars": "grammars"},
)
