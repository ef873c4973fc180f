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
    assert doc["format"] == "brax-io.trajectory" and doc["version"] == 2
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


def test_meshes_hfields_groups_and_materials(terrain: tuple[Any, Any]) -> None:
    import mujoco

    sys, state = terrain
    desc, _ = bjson.loads(bjson.dumps(sys, state))
    m = sys.mj_model
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    hills, gem, hidden = desc["geoms"]
    # The mesh: world vertices from the document's frames equal MuJoCo's geom frame applied to its vertices.
    mesh = desc["meshes"][gem["mesh"]]
    vert = np.asarray(mesh["vert"]).reshape(-1, 3)
    body_pos, body_quat = np.asarray(state.x.pos[gem["body"]]), np.asarray(state.x.rot[gem["body"]])
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(body_quat, np.float64))
    gmat = np.zeros(9)
    mujoco.mju_quat2Mat(gmat, np.asarray(gem["quat"], np.float64))
    local = np.asarray(gem["pos"]) + vert @ gmat.reshape(3, 3).T
    ours = body_pos + local @ mat.reshape(3, 3).T
    want = d.geom_xpos[1] + m.mesh_vert @ d.geom_xmat[1].reshape(3, 3).T
    np.testing.assert_allclose(ours, want, atol=1e-5)
    assert len(mesh["face"]) == 3 * m.mesh_facenum[0] and len(mesh["facenormal"]) == len(mesh["face"])
    # Colour from the material (the geom keeps MuJoCo's default rgba); groups as MuJoCo's.
    assert gem["rgba"] == pytest.approx([0.05, 0.85, 0.2, 1.0])
    assert (hills["group"], gem["group"], hidden["group"]) == (0, 0, 3)
    # The height field: MuJoCo's grid and normalized elevations.
    hf = desc["hfields"][hills["hfield"]]
    assert (hf["nrow"], hf["ncol"]) == (5, 6)
    np.testing.assert_allclose(hf["size"], m.hfield_size[0], atol=1e-6)
    np.testing.assert_allclose(hf["data"], m.hfield_data, atol=1e-5)
    assert max(hf["data"]) == pytest.approx(1.0)
