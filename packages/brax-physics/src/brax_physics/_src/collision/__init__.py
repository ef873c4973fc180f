"""Collision detection: load-time candidate pairs, per-pair narrow phase, batched `collide`."""

from brax_physics._src.collision.contact import Contact, collide
from brax_physics._src.collision.convex import COLLIDERS
from brax_physics._src.collision.pairs import collision_pairs, dynamic_pairs
from brax_physics._src.collision.primitives import NO_CONTACT, make_frame
from brax_physics._src.collision.types import CollisionPairs, PairGroup

__all__ = [
    "COLLIDERS",
    "NO_CONTACT",
    "CollisionPairs",
    "Contact",
    "PairGroup",
    "collide",
    "collision_pairs",
    "dynamic_pairs",
    "make_frame",
]
