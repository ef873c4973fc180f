"""Rough terrain: the generator, the ground it makes against MuJoCo C, the curriculum and its persistence."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_envs
from brax_envs import locomotion, testing
from brax_envs.base import State
from brax_envs.locomotion.joystick import Joystick
from brax_envs.locomotion.terrain import Terrain, heights, next_level, surface

T = Terrain()
BUMPS, HILLS, STAIRS = (dataclasses.replace(T, kinds=k) for k in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0),
                                                                   (0.0, 0.0, 1.0)))
_heights = jax.jit(heights, static_argnums=0)


def _grid(t: Terrain) -> tuple[np.ndarray, np.ndarray]:
    """(size, size) x and y of each sample, and how far (Chebyshev) it lies outside the spawn patch."""
    x = np.linspace(-t.half_extent, t.half_extent, t.size)
    ax, ay = np.meshgrid(x, x)
    return ax, np.maximum(np.abs(ax), np.abs(ay)) - t.spawn_radius


@pytest.mark.parametrize("t", [T, BUMPS, HILLS, STAIRS], ids=["mixed", "bumps", "hills", "stairs"])
def test_fields_are_normalized_with_a_flat_spawn_patch(t: Terrain) -> None:
    fields = np.asarray(jax.vmap(functools.partial(heights, t))(jax.random.split(jax.random.PRNGKey(0), 8)))
    assert fields.shape == (8, 64, 64) and fields.dtype == np.float32
    assert fields.min() == 0.0 and 0.4 < fields.max() <= 1.0
    _, d = _grid(t)
    assert np.all(fields[:, d <= 0.0] == 0.0)
    assert np.all(fields[:, d > 3 * t.spacing].max(axis=1) > 0.0)  # every field has relief
    # the patch covers the reset's spread (0.5 m) plus a quadruped's reach, one cell to spare
    assert t.spawn_radius - t.spacing > 0.5 + 0.35


def test_stairs_climb_in_square_rings_and_come_back_down() -> None:
    h = np.asarray(_heights(STAIRS, jax.random.PRNGKey(1)))
    _, d = _grid(STAIRS)
    tread = np.floor(d / STAIRS.stair_width) + 1
    phase = np.mod(tread, 6)
    want = np.where(d > 0, np.minimum(phase, 6 - phase) / 3, 0.0)
    # float32 may round a sample on a riser's edge to either side
    edge = np.abs(d / STAIRS.stair_width - np.round(d / STAIRS.stair_width)) < 1e-4
    np.testing.assert_allclose(h[~edge], want[~edge], atol=1e-6)
    assert set(np.round(np.unique(h) * 3).astype(int)) == {0, 1, 2, 3}
    assert float(h.sum()) == pytest.approx(1689.333, abs=1e-2)


def test_hills_and_bumps_follow_their_parameters() -> None:
    key = jax.random.PRNGKey(2)
    _, d = _grid(HILLS)
    hills = np.asarray(_heights(HILLS, key))
    tri = 1.0 - np.abs(np.mod(d / HILLS.slope_length, 2.0) - 1.0)
    out = d > 0
    noise = (hills[out] - 0.9 * tri[out]) / 0.1
    assert noise.min() >= -1e-5 and noise.max() <= 1 + 1e-5 and noise.std() > 0.2  # uniform noise
    bumps = np.asarray(_heights(BUMPS, key))
    assert bumps.max() <= BUMPS.bump_height
    fade = np.clip(d / BUMPS.bump_spacing, 0.0, 1.0)
    assert np.all(bumps <= BUMPS.bump_height * fade + 1e-6)
    # smooth: neighbouring samples a quarter spacing apart differ by far less than the bumps' span
    assert np.abs(np.diff(bumps, axis=1)).max() < 0.5 * BUMPS.bump_height


def test_fields_are_determined_by_the_key() -> None:
    a, b = np.asarray(_heights(T, jax.random.PRNGKey(5))), np.asarray(_heights(T, jax.random.PRNGKey(5)))
    np.testing.assert_array_equal(a, b)
    kinds = {float(np.asarray(_heights(T, k)).sum()) for k in jax.random.split(jax.random.PRNGKey(0), 8)}
    assert len(kinds) >= 4
    h = np.asarray(_heights(T, jax.random.PRNGKey(0)))
    assert float(h.sum()) == pytest.approx(843.797, abs=1e-2)  # this key draws bumps
    np.testing.assert_allclose(h[40, 10:14], [0.211209, 0.265939, 0.305227, 0.277604], atol=1e-5)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("size", 1, r"Terrain.size must be at least 2"),
    ("max_height", 0.0, r"Terrain.max_height must be positive"),
    ("kinds", (0.5, 0.5, 0.5), r"Terrain.kinds must be 3 probabilities"),
    ("roughness", 1.5, r"Terrain.roughness must be in \[0, 1\]"),
    ("levels", 1, r"Terrain.levels must be at least 2"),
    ("spawn_radius", 3.8, r"Terrain.spawn_radius must be in"),
])
def test_terrain_errors_name_the_field(field: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(T, **{field: value})


def test_curriculum_rule() -> None:
    step = 1.0 / 9.0

    def nxt(level: float, fallen: bool = False, end: bool = True, tracking: float = 0.9,
            moving: bool = True) -> float:
        return float(next_level(T, jnp.float32(level), fallen=jnp.asarray(fallen),
                                interval_end=jnp.asarray(end), tracking=jnp.float32(tracking),
                                moving=jnp.asarray(moving)))

    assert nxt(0.5) == pytest.approx(0.5 + step)  # tracked well: up
    assert nxt(0.5, tracking=0.7) == pytest.approx(0.5)  # below promote_tracking
    assert nxt(0.5, end=False) == pytest.approx(0.5)  # only at the end of an interval
    assert nxt(0.5, moving=False) == pytest.approx(0.5)  # standing still proves nothing
    assert nxt(0.5, fallen=True) == pytest.approx(0.5 - step)  # fell: down, even at an interval's end
    assert nxt(0.5, fallen=True, end=False) == pytest.approx(0.5 - step)
    assert nxt(1.0) == 1.0 and nxt(0.0, fallen=True) == 0.0  # clipped to [0, 1]


# ---- the ground: our surface reading and our physics on it, against MuJoCo C ----

SCENE = locomotion.asset("quadruped_scene_rough.xml")


def _mj_model(field: np.ndarray, level: float) -> mujoco.MjModel:
    """The rough quadruped scene with `field` at `level` as its height field."""
    m = mujoco.MjModel.from_xml_path(str(SCENE))
    m.hfield_data[:] = field.ravel() * level * T.max_height / m.hfield_size[0, 2]
    return m


def test_surface_matches_mujoco_rays() -> None:
    field = np.asarray(_heights(T, jax.random.PRNGKey(3)))
    m = _mj_model(field, 0.7)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    rng = np.random.default_rng(0)
    pts = rng.uniform(1.5, 3.9, (40, 2)) * rng.choice([-1, 1], (40, 2))  # off the patch, clear of the robot
    geomid = np.zeros(1, np.int32)
    want = [2.0 - mujoco.mj_ray(m, d, np.array([x, y, 2.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geomid)
            for x, y in pts]
    got = surface(T, jnp.asarray(field * 0.7 * T.max_height), jnp.asarray(pts, jnp.float32))
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


@functools.cache
def _quadruped() -> Joystick:
    env = locomotion.quadruped_joystick_rough(reset_level=0.5)
    return env


@pytest.fixture(scope="module")
def check() -> testing.EnvCheck:
    """`check_env` on the rough quadruped; its jitted step serves the tests below (one compile). The
    locomotion tasks' batched step is compiled and compared in joystick_test.py; traced here."""
    return testing.check_env(_quadruped(), num_steps=2, vmap="trace")


def _state(check: testing.EnvCheck, at: int = 0, **info: Any) -> State:
    """State `at` of the checked rollout (0: the reset) with `info` entries replaced."""
    s = check.states[at]
    return s.replace(info={**s.info, **{k: jnp.asarray(v, s.info[k].dtype) for k, v in info.items()}})


def test_rough_quadruped_follows_the_contract(check: testing.EnvCheck) -> None:
    env = _quadruped()
    s = check.states[0]
    assert env.persistent_info == ("terrain_level",)
    assert s.info["terrain"].shape == (64 * 64,)
    assert float(s.info["terrain_level"]) == 0.5 and float(s.info["terrain_episode_level"]) == 0.5
    # the keyframe stands on its four feet on the spawn patch (the flat task's test draws this key too)
    assert bool(jnp.all(check.reset(jax.random.PRNGKey(4)).info["last_contact"]))
    obs = env.observation_size
    assert isinstance(obs, dict)
    flat = 9 + 3 * 12 + 4 + 2 * 4
    assert obs["privileged_state"] == (flat + 25 + 4,)
    # the scan and the foot clearances read the flat patch at 0: the torso's and the feet's heights
    priv = s.obs["privileged_state"]
    np.testing.assert_allclose(priv[flat:flat + 25], s.pipeline_state.q[2], atol=1e-6)
    feet = np.asarray([env.sys.geom_names.index(f) for f in locomotion.QUADRUPED.feet])
    np.testing.assert_allclose(priv[flat + 25:], s.pipeline_state.geom_xpos[feet, 2], atol=1e-6)


def test_a_new_terrain_does_not_recompile(check: testing.EnvCheck) -> None:
    cache_size = check.step._cache_size  # type: ignore[attr-defined]
    before = cache_size()
    for key in (11, 12):
        field = jnp.ravel(_heights(T, jax.random.PRNGKey(key)))
        out = check.step(_state(check, terrain=field, terrain_level=1.0), jnp.zeros(12))
        assert float(out.done) == 0.0  # spawned on the patch, whatever the field
    assert cache_size() == before == 1


def test_quadruped_on_generated_terrain_matches_mujoco(check: testing.EnvCheck) -> None:
    """Dropped onto bumps at level 0.8, the quadruped moves as in MuJoCo C for 20 physics steps."""
    env = _quadruped()
    level = 0.8
    field = np.asarray(_heights(BUMPS, jax.random.PRNGKey(4)))
    m = _mj_model(field, level)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    d.qpos[0:2] = (2.0, 0.6)
    mujoco.mj_kinematics(m, d)
    feet = np.array([d.geom_xpos[m.geom(f).id] for f in locomotion.QUADRUPED.feet])
    elevation = jnp.asarray(field * level * T.max_height)
    ground = np.asarray(surface(T, elevation, jnp.asarray(feet[:, :2], jnp.float32)))
    assert np.ptp(ground) > 0.01  # the feet stand over uneven ground
    d.qpos[2] += ground.max() + 0.002
    q0 = d.qpos.copy()
    for _ in range(20):
        mujoco.mj_step(m, d)
    assert np.any([m.geom_dataid[c.geom1] == 0 or m.geom_dataid[c.geom2] == 0 for c in d.contact[:d.ncon]])

    moved, _ = env._on_terrain(jnp.ravel(jnp.asarray(field)), jnp.float32(level))
    ps = moved.pipeline_init(jnp.asarray(q0, jnp.float32), jnp.zeros(m.nv, jnp.float32))
    state = _state(check, terrain=field.ravel(), terrain_level=level).replace(pipeline_state=ps)
    for _ in range(4):  # 5 physics steps each, driving the keyframe's targets
        state = check.step(state, jnp.zeros(12))
    assert float(state.info["terrain_episode_level"]) == pytest.approx(level)
    np.testing.assert_allclose(np.asarray(state.pipeline_state.q), d.qpos, atol=5e-3)
    assert abs(float(state.pipeline_state.q[2]) - q0[2]) > 1e-3  # it did fall onto the bumps


# ---- the curriculum inside the task ----


def test_the_episode_level_is_read_on_its_first_step(check: testing.EnvCheck) -> None:
    # an auto-reset brings the persisted level into the reset state: the first step adopts it
    first = check.step(_state(check, terrain_level=0.8), jnp.zeros(12))
    assert float(first.info["terrain_episode_level"]) == pytest.approx(0.8)
    assert float(first.metrics["terrain_level"]) == pytest.approx(0.8)
    # later level changes wait for the next episode
    later = first.replace(info={**first.info, "terrain_level": jnp.float32(0.2)})
    assert float(check.step(later, jnp.zeros(12)).info["terrain_episode_level"]) == pytest.approx(0.8)


def test_level_rises_after_a_well_tracked_interval(check: testing.EnvCheck) -> None:
    env = _quadruped()
    steps = round(env._command_steps)
    # one step into the episode: its first step would restart the sum
    s = _state(check, 1, command=[0.5, 0.0, 0.0], command_countdown=1, terrain_tracking=0.9 * steps)
    out = check.step(s, jnp.zeros(12))
    assert float(out.info["terrain_level"]) == pytest.approx(0.5 + 1 / 9)
    assert float(out.info["terrain_tracking"]) == 0.0
    assert float(out.info["terrain_episode_level"]) == pytest.approx(0.5)
    # mid-interval, the tracking sum grows by this step's term
    mid = check.step(_state(check, 1, command_countdown=7, terrain_tracking=3.0), jnp.zeros(12))
    assert float(mid.info["terrain_level"]) == 0.5
    term = float(mid.metrics["reward/tracking_lin_vel"])
    assert float(mid.info["terrain_tracking"]) == pytest.approx(3.0 + term)
    # an episode's first step starts a new sum
    start = check.step(_state(check, terrain_tracking=3.0), jnp.zeros(12))
    first_term = float(start.metrics["reward/tracking_lin_vel"])
    assert float(start.info["terrain_tracking"]) == pytest.approx(first_term)


def test_level_falls_with_the_robot(check: testing.EnvCheck) -> None:
    s = check.states[0]
    q = s.pipeline_state.q.at[3:7].set(jnp.asarray([0.0, 1.0, 0.0, 0.0]))  # upside down
    out = check.step(s.replace(pipeline_state=s.pipeline_state.replace(q=q)), jnp.zeros(12))
    assert float(out.done) == 1.0 and float(out.metrics["reward/termination"]) == 1.0
    assert float(out.info["truncation"]) == 0.0
    assert float(out.info["terrain_level"]) == pytest.approx(0.5 - 1 / 9)


def test_leaving_the_field_truncates(check: testing.EnvCheck) -> None:
    s = _state(check, terrain=np.zeros(64 * 64))  # level ground at the edge: only the edge ends it
    q = s.pipeline_state.q.at[0:2].set(jnp.asarray([3.7, 0.0]))
    out = check.step(s.replace(pipeline_state=s.pipeline_state.replace(q=q)), jnp.zeros(12))
    assert float(out.done) == 1.0 and float(out.info["truncation"]) == 1.0
    assert float(out.metrics["reward/termination"]) == 0.0
    assert float(out.info["terrain_level"]) == 0.5


def test_terrain_must_fit_the_model() -> None:
    with pytest.raises(ValueError, match=r"Terrain.size = 32 but the model's height field is 64 x 64"):
        locomotion.quadruped_joystick_rough(terrain=dataclasses.replace(T, size=32))
    with pytest.raises(ValueError, match=r"Terrain.max_height = 0.5 exceeds"):
        locomotion.quadruped_joystick_rough(terrain=dataclasses.replace(T, max_height=0.5))
    with pytest.raises(ValueError, match=r"Terrain.half_extent = 3.0"):
        locomotion.quadruped_joystick_rough(terrain=dataclasses.replace(T, half_extent=3.0))
    with pytest.raises(ValueError, match=r"Joystick.reset_level must be in \[0, 1\]"):
        locomotion.quadruped_joystick_rough(reset_level=1.5)
    with pytest.raises(ValueError, match=r"Terrain.spawn_radius = 0.6 is too small for this robot's resets"):
        locomotion.quadruped_joystick_rough(terrain=dataclasses.replace(T, spawn_radius=0.6))
    with pytest.raises(ValueError, match=r"Joystick.reset_level = 0.3 needs a terrain"):
        locomotion.quadruped_joystick(reset_level=0.3)
    with pytest.raises(ValueError, match=r"exactly one height field"):
        Joystick(locomotion.asset("quadruped_scene_flat.xml"), locomotion.QUADRUPED, terrain=T)
    flat = locomotion.quadruped_joystick()
    assert flat.persistent_info == () and flat.terrain is None


def test_factories_build_both_robots() -> None:
    humanoid = locomotion.humanoid_joystick_rough()
    assert humanoid.terrain == locomotion.HUMANOID_TERRAIN and humanoid.sys.hfield_size.shape == (1, 4)
    assert float(humanoid.sys.hfield_size[0, 2]) == pytest.approx(locomotion.HUMANOID_TERRAIN.max_height)
    assert isinstance(brax_envs.locomotion.quadruped_joystick_rough(), Joystick)
