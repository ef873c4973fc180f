"""The import-layer check (tools/ci/layers.py): the repository passes, and each rule catches its breach."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "ci"))
import layers


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    """Write `files` (paths under `src/`) and return the packages found there."""
    src = root / "src"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {p.name: src for p in src.iterdir() if (p / "__init__.py").exists()}


def _clean() -> dict[str, str]:
    return {
        "brax_math/__init__.py": "import numpy\n",
        "brax_physics/__init__.py": "from brax_physics import a\n",
        "brax_physics/a.py": "import brax_math\nfrom brax_physics import b\n",
        "brax_physics/b.py": "def f():\n    from brax_physics import a\n",  # function-local: no cycle
        "brax_train/__init__.py": "",
        "brax_train/ppo/__init__.py": "from brax_train import shared\n",
        "brax_train/rppo/__init__.py": "from brax_train.ppo import x\n",  # a declared variant
        "brax_train/sac/train_test.py": "from brax_train.ppo import x\n",  # tests may
        "brax_train/shared.py": "import brax_physics\n",
    }


def test_the_repository_keeps_its_layers() -> None:
    assert layers.violations() == []
    assert layers.main([]) == 0


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert layers.violations(_tree(tmp_path, _clean())) == []


@pytest.mark.parametrize(("name", "text", "message"), [
    ("brax_math/up.py", "import brax_physics\n",
     "brax_math imports brax_physics (brax_physics is not below brax_math)"),
    ("brax_physics/up_test.py", "from brax_train import ppo\n",
     "brax_physics imports brax_train (brax_train is not below brax_physics)"),
    ("brax_physics/nn.py", "import flax.linen\n",
     "brax_physics imports flax.linen (never a dependency of brax_physics)"),
    ("brax_train/sac/train.py", "from brax_train.ppo import losses\n", "agent sac imports agent ppo"),
    ("brax_train/ppo/recur.py", "from brax_train.rppo import x\n", "agent ppo imports agent rppo"),
    ("brax_physics/b.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from brax_physics.a import T\n",
     "import cycle among brax_physics.a, brax_physics.b"),
])
def test_each_rule_names_its_breach(tmp_path: Path, name: str, text: str, message: str) -> None:
    files = _clean()
    files[name] = text
    found = layers.violations(_tree(tmp_path, files))
    assert len(found) == 1, found
    assert message in found[0]
    if "cycle" not in message:
        assert found[0].startswith(str(tmp_path / "src" / name) + ":")
