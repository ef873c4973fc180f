"""The shared version lookup."""

from __future__ import annotations

import brax_train
from brax_train._versions import RECORDED, installed_version, package_versions


def test_installed_and_missing() -> None:
    assert installed_version("brax-train") == brax_train.__version__
    assert installed_version("no-such-distribution-xyz") is None
    versions = package_versions()
    assert tuple(versions) == RECORDED and versions["jax"]
    assert package_versions(("no-such-distribution-xyz",)) == {"no-such-distribution-xyz": None}
