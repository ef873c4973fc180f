"""brax-math: quaternions, spatial algebra and safe numerics for the brax-* physics stack."""

from importlib.metadata import PackageNotFoundError, version

from brax_math.quaternion import (
    axis_angle_to_quat,
    euler_to_quat,
    inv_rotate,
    mat_to_quat,
    quat_canonical,
    quat_conj,
    quat_exp,
    quat_identity,
    quat_integrate,
    quat_inv,
    quat_log,
    quat_mul,
    quat_normalize,
    quat_to_axis_angle,
    quat_to_euler,
    quat_to_mat,
    relative_quat,
    rotate,
)
from brax_math.safe import all_finite, normalize, safe_arccos, safe_arcsin, safe_div, safe_norm
from brax_math.spatial import (
    Motion,
    Transform,
    com_inertia,
    force_cross,
    inertia_mul,
    motion_cross,
    point_velocity,
    rotation_motion,
    spatial_force,
)
from brax_math.vector import cross

try:
    __version__ = version("brax-math")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = [
    "Motion",
    "Transform",
    "__version__",
    "all_finite",
    "axis_angle_to_quat",
    "com_inertia",
    "cross",
    "euler_to_quat",
    "force_cross",
    "inertia_mul",
    "inv_rotate",
    "mat_to_quat",
    "motion_cross",
    "normalize",
    "point_velocity",
    "quat_canonical",
    "quat_conj",
    "quat_exp",
    "quat_identity",
    "quat_integrate",
    "quat_inv",
    "quat_log",
    "quat_mul",
    "quat_normalize",
    "quat_to_axis_angle",
    "quat_to_euler",
    "quat_to_mat",
    "relative_quat",
    "rotate",
    "rotation_motion",
    "safe_arccos",
    "safe_arcsin",
    "safe_div",
    "safe_norm",
    "spatial_force",
]
