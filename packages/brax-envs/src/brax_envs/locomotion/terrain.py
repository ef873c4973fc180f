"""Rough terrain for the joystick task: square height fields drawn from a PRNG key, and their curriculum.

`heights(terrain, key)` draws one normalized field, (size, size) elevations in [0, 1] laid out as
MuJoCo's `hfield_data` (row r at y, column c at x). Each key picks one of three kinds, with the
probabilities `Terrain.kinds`, in the spirit of the sub-terrains of legged-robot curricula (Rudin et
al. 2021, "Learning to walk in minutes"):

- bumps: random heights on a coarse grid `bump_spacing` apart, interpolated bilinearly, spanning
  [0, bump_height], faded in over one spacing from the spawn patch;
- hills: a square-pyramid wave, rising from 0 at the patch to 1 over `slope_length` and falling back
  as far, over and over, plus `roughness` of uniform noise per sample;
- stairs: square rings of treads `stair_width` deep that climb `stair_steps` steps to 1, then step down
  as many to 0, over and over.

Every kind is a function of the Chebyshev distance from the origin, so the features are square rings
around the spawn point, and is 0 on the flat square patch of half side `spawn_radius` where episodes
start. A field of level l in [0, 1] stands `l * max_height * heights` high; `next_level` is the
curriculum rule that moves an environment's level.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax.scipy import ndimage


@dataclasses.dataclass(frozen=True)
class Terrain:
    """A family of square height fields around a flat spawn patch, and the curriculum over their heights."""

    size: int = 64
    """Samples per side: the height field's `nrow` and `ncol`."""
    half_extent: float = 4.0
    """Half the side (m): the field spans [-half_extent, half_extent] in x and in y."""
    max_height: float = 0.3
    """Elevation (m) of normalized height 1 at the top curriculum level (level 1)."""
    kinds: tuple[float, float, float] = (0.4, 0.3, 0.3)
    """Probabilities of the three kinds of field: bumps, hills, stairs."""
    bump_spacing: float = 0.5
    """Distance (m) between the random heights that are interpolated into bumps."""
    bump_height: float = 0.5
    """Bumps span [0, bump_height] of the normalized range."""
    slope_length: float = 1.0
    """Horizontal run (m) of a hill from its foot (0) to its crest (1)."""
    roughness: float = 0.1
    """Fraction of a hill's normalized height that is uniform noise."""
    stair_width: float = 0.4
    """Tread depth (m) of the stairs."""
    stair_steps: int = 3
    """Steps from the ground (0) to the top (1) of the stairs; each rises 1 / stair_steps."""
    spawn_radius: float = 1.2
    """Half side (m) of the flat square patch at height 0 around the origin, where episodes start."""
    border: float = 0.5
    """An episode is truncated when the torso comes within this distance (m) of the field's edge."""
    levels: int = 10
    """Curriculum levels, evenly spaced over [0, 1]; a fall or a well-tracked interval moves one."""
    promote_tracking: float = 0.75
    """A command interval whose mean linear-velocity tracking term reaches this raises the level."""
    scan_points: int = 5
    """The critic sees the ground on a scan_points x scan_points grid centred under the torso."""
    scan_spacing: float = 0.1
    """Spacing (m) of that grid, which turns with the torso's heading."""

    def __post_init__(self) -> None:
        """Check the fields."""
        if self.size < 2:
            raise ValueError(f"Terrain.size must be at least 2, got {self.size!r}")
        for name in ("half_extent", "max_height", "bump_spacing", "slope_length", "stair_width",
                     "scan_spacing"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Terrain.{name} must be positive, got {getattr(self, name)!r}")
        for name in ("bump_height", "roughness"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"Terrain.{name} must be in [0, 1], got {getattr(self, name)!r}")
        if len(self.kinds) != 3 or min(self.kinds) < 0 or not math.isclose(sum(self.kinds), 1.0):
            raise ValueError(f"Terrain.kinds must be 3 probabilities (bumps, hills, stairs) summing to 1, "
                             f"got {self.kinds!r}")
        if self.stair_steps < 1:
            raise ValueError(f"Terrain.stair_steps must be at least 1, got {self.stair_steps!r}")
        if self.levels < 2:
            raise ValueError(f"Terrain.levels must be at least 2, got {self.levels!r}")
        if self.scan_points < 1:
            raise ValueError(f"Terrain.scan_points must be at least 1, got {self.scan_points!r}")
        if not 0.0 <= self.spawn_radius < self.half_extent - self.border:
            raise ValueError(f"Terrain.spawn_radius must be in [0, half_extent - border), got "
                             f"{self.spawn_radius!r}")
        if not 0.0 <= self.border < self.half_extent:
            raise ValueError(f"Terrain.border must be in [0, half_extent), got {self.border!r}")

    @property
    def spacing(self) -> float:
        """Distance (m) between neighbouring samples."""
        return 2.0 * self.half_extent / (self.size - 1)

    @property
    def level_step(self) -> float:
        """How far one curriculum level moves the level in [0, 1]."""
        return 1.0 / (self.levels - 1)


def _triangle(t: jax.Array) -> jax.Array:
    """A triangle wave: 0 at even t, 1 at odd t, linear between."""
    return 1.0 - jnp.abs(jnp.mod(t, 2.0) - 1.0)


def heights(terrain: Terrain, key: jax.Array) -> jax.Array:
    """(size, size) float32 normalized elevations in [0, 1] drawn with `key`: row r at y, column c at x.

    The kind (bumps, hills or stairs) is drawn from `terrain.kinds`; the square patch of half side
    `spawn_radius` around the origin is 0. Jittable and vmappable over `key`.
    """
    t = terrain
    k_kind, k_bumps, k_noise = jax.random.split(key, 3)
    x = jnp.linspace(-t.half_extent, t.half_extent, t.size, dtype=jnp.float32)
    ax, ay = jnp.meshgrid(x, x)  # ax[r, c] = x of column c, ay[r, c] = y of row r
    d = jnp.maximum(jnp.abs(ax), jnp.abs(ay)) - t.spawn_radius  # how far outside the patch

    n_coarse = math.ceil(2.0 * t.half_extent / t.bump_spacing) + 1
    coarse = jax.random.uniform(k_bumps, (n_coarse, n_coarse), jnp.float32)
    scale = (n_coarse - 1) / (2.0 * t.half_extent)
    bumps = ndimage.map_coordinates(coarse, [(ay + t.half_extent) * scale, (ax + t.half_extent) * scale],
                                    order=1, mode="nearest")
    # fading in keeps the patch's edge from becoming a wall the robot starts against
    bumps = t.bump_height * bumps * jnp.clip(d / t.bump_spacing, 0.0, 1.0)

    noise = jax.random.uniform(k_noise, (t.size, t.size), jnp.float32)
    hills = (1.0 - t.roughness) * _triangle(d / t.slope_length) + t.roughness * noise

    tread = jnp.floor(d / t.stair_width) + 1.0  # 1 on the first tread outside the patch
    phase = jnp.mod(tread, 2.0 * t.stair_steps)
    stairs = jnp.minimum(phase, 2.0 * t.stair_steps - phase) / t.stair_steps

    kind = jax.random.choice(k_kind, 3, p=jnp.asarray(t.kinds, jnp.float32))
    field = jnp.stack([bumps, hills, stairs])[kind]
    return jnp.where(d > 0.0, jnp.clip(field, 0.0, 1.0), 0.0).astype(jnp.float32)


def surface(terrain: Terrain, elevation: jax.Array, xy: jax.Array) -> jax.Array:
    """(...) height (m) of the ground under points `xy` (..., 2), `elevation` (size, size) in metres.

    MuJoCo's surface: each grid cell is two triangles split along its (c, r)-(c+1, r+1) diagonal.
    Points beyond the field read its nearest edge.
    """
    t = terrain
    n = t.size
    u = jnp.clip((xy[..., 0] + t.half_extent) / t.spacing, 0.0, n - 1.0)  # column coordinate
    v = jnp.clip((xy[..., 1] + t.half_extent) / t.spacing, 0.0, n - 1.0)  # row coordinate
    cf = jnp.clip(jnp.floor(u), 0.0, n - 2.0)
    rf = jnp.clip(jnp.floor(v), 0.0, n - 2.0)
    fu, fv = u - cf, v - rf
    c, r = cf.astype(jnp.int32), rf.astype(jnp.int32)
    h00, h10 = elevation[r, c], elevation[r, c + 1]
    h01, h11 = elevation[r + 1, c], elevation[r + 1, c + 1]
    lower = h00 + fu * (h10 - h00) + fv * (h11 - h10)  # triangle (c, r), (c+1, r), (c+1, r+1)
    upper = h00 + fv * (h01 - h00) + fu * (h11 - h01)  # triangle (c, r), (c, r+1), (c+1, r+1)
    return jnp.where(fu >= fv, lower, upper)


def next_level(terrain: Terrain, level: jax.Array, *, fallen: jax.Array, interval_end: jax.Array,
               tracking: jax.Array, moving: jax.Array) -> jax.Array:
    """() the curriculum level after a step, in [0, 1].

    One level (`terrain.level_step`) down when the robot fell; one up when a command interval ends
    (`interval_end`) whose command was `moving` and whose mean linear-velocity `tracking` term reached
    `terrain.promote_tracking`, unless it fell.
    """
    up = interval_end & moving & (tracking >= terrain.promote_tracking) & ~fallen
    delta = terrain.level_step * (up.astype(jnp.float32) - fallen.astype(jnp.float32))
    return jnp.clip(level + delta, 0.0, 1.0).astype(jnp.float32)


__all__ = ["Terrain", "heights", "next_level", "surface"]
