"""Tests for brax_io.json: schema contents and round trips of list and time-batched trajectories."""

import json as std_json
from typing import Any

import jax
import numpy as np
import pytest

from brax_io import json as bjson


def test_round_trip_list_of_states(scene: tuple[Any, list[Any]]) -> None:
    sys, states = scene
    text = bjson.dumps(sys, states)
    doc = std_json.loads(text)  # plain JSON
    assert doc["format"] == "brax-io.trajectory" and doc["version"] == 1
    desc, traj = bjson.loads(text)
    assert "trajectory" not in desc
    assert desc["dt"] == pytest.approx(0.01)
    assert [b["name"] for b in desc["bodies"]] == list(sys.body_names)
    assert [g["type"] for g in desc["geoms"]] == [
        "plane",
        "box",
        "capsule",
        "sphere",
        "cylinder",
        "ellipsoid",
    ]
    box = desc["geoms"][1]
    assert box["body"] == 1 and box["size"] == pytest.approx([0.15, 0.15, 0.15])
    assert box["rgba"] == pytest.approx([0.9, 0.1, 0.1, 1.0])
    np.testing.assert_allclose(desc["geoms"][2]["quat"], np.asarray(sys.geom_quat[2]), atol=1e-6)
    want_pos = np.stack([np.asarray(s.x.pos) for s in states])
    want_rot = np.stack([np.asarray(s.x.rot) for s in states])
    assert traj["pos"].shape == (len(states), sys.nbody, 3) and traj["pos"].dtype == np.float32
    np.testing.assert_allclose(traj["pos"], want_pos, atol=1e-6)
    np.testing.assert_allclose(traj["rot"], want_rot, atol=1e-6)


def test_batched_states_and_dt_override(scene: tuple[Any, list[Any]]) -> None:
    sys, states = scene
    batched = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *states)
    desc, traj = bjson.loads(bjson.dumps(sys, batched, dt=0.05))
    assert desc["dt"] == pytest.approx(0.05)
    _, traj_list = bjson.loads(bjson.dumps(sys, states))
    np.testing.assert_array_equal(traj["pos"], traj_list["pos"])
    np.testing.assert_array_equal(traj["rot"], traj_list["rot"])
    # A single state is a one-frame trajectory.
    _, one = bjson.loads(bjson.dumps(sys, states[0]))
    assert one["pos"].shape == (1, sys.nbody, 3)


def test_bad_inputs(scene: tuple[Any, list[Any]]) -> None:
    sys, states = scene
    with pytest.raises(ValueError, match="empty"):
        bjson.dumps(sys, [])
    with pytest.raises(ValueError, match=r"not a brax-io\.trajectory"):
        bjson.loads('{"format": "other"}')
    batched = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *states)
    two_d = jax.tree_util.tree_map(lambda x: np.stack([x, x], axis=1), batched)
    with pytest.raises(ValueError, match="select one environment"):
        bjson.dumps(sys, two_d)
