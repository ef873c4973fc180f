"""Multi-process training on `jax.distributed`: start-up, the primary process, and lost-peer detection.

One process per host (or per GPU), every process runs the same program. `initialize` wraps
`jax.distributed.initialize` (coordinator address, process count and id from its arguments, the
`JAX_COORDINATOR_ADDRESS` family of variables, or Slurm / Open MPI auto-detection, as JAX reads them).
The runner's device mesh spans every process's devices, so the batch is sharded across hosts; only
the primary process (0) evaluates, reports and writes checkpoints. During training a watchdog
watches the other processes: when one goes silent (killed, crashed, its host lost), every other
process prints an error naming it and the last complete checkpoint and exits with
`EXIT_PEER_LOST`, instead of blocking in a collective for ever. A lost process 0 also takes the
coordination service with it: JAX then ends the others at once, naming the leader task.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

logger = logging.getLogger("brax_train.distributed")

EXIT_PEER_LOST = 75
"""Exit status of a process whose peer was lost (EX_TEMPFAIL: resume from the last checkpoint)."""
DEFAULT_PEER_TIMEOUT_S = 20.0
"""Seconds a peer may go silent during training before it counts as lost."""
_PREFIX = "brax_train/alive/"


def is_primary() -> bool:
    """Whether this is process 0, the one that evaluates, reports and writes checkpoints and run files."""
    return jax.process_index() == 0


def _client() -> Any:
    from jax._src import distributed as jax_distributed  # the client has no public accessor

    return jax_distributed.global_state.client


def describe_loss(lost: Sequence[int], last_checkpoint: str | None, silent_s: float) -> str:
    """The error text for lost peers."""
    who = ", ".join(str(p) for p in lost)
    noun = "process" if len(lost) == 1 else "processes"
    where = last_checkpoint if last_checkpoint is not None else "none (no checkpoint saved yet)"
    return (
        f"lost {noun} {who} of {jax.process_count()} (silent for {silent_s:.0f} s); process "
        f"{jax.process_index()} stops; last complete checkpoint: {where}"
    )


class _Watchdog:
    """Heartbeats through the coordination service's key-value store, and watches the peers' heartbeats.

    Each process bumps its own key every `poll_s`; while armed (during training), a peer whose key
    has not changed for `timeout_s` is reported and this process exits with `EXIT_PEER_LOST`: its
    main thread may be blocked in a collective that would never return. (JAX's own heartbeat would
    abort every process too, but only after its timeout, with a message about "tasks".)
    """

    def __init__(self, timeout_s: float, poll_s: float) -> None:
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self.armed = False
        self.last_checkpoint: Callable[[], str | None] = lambda: None
        self._seen: dict[str, tuple[str, float]] = {}
        self._beat = 0
        self._stop = threading.Event()
        name = "brax_train.distributed.watchdog"
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()
        atexit.register(self.close)  # runs before JAX's own shutdown (registered at import)

    def arm(self, last_checkpoint: Callable[[], str | None]) -> None:
        """Start acting on silent peers; `last_checkpoint()` names the last save in the error."""
        self.last_checkpoint = last_checkpoint
        self._seen = {}
        self.armed = True

    def disarm(self) -> None:
        """Stop acting: peers leave normally once the run is over."""
        self.armed = False

    def close(self) -> None:
        """Disarm and end the heartbeat thread, waiting for a call to the coordination service to return.

        A daemon thread still inside that C++ client when the interpreter finalizes is torn down
        by a forced unwind, which the client's bindings swallow: the process then aborts
        ("FATAL: exception not rethrown") after a run that succeeded.
        """
        self.disarm()
        self._stop.set()
        self._thread.join(timeout=10 * self.poll_s + 10.0)

    def _silent(self, client: Any) -> tuple[list[int], float]:
        now = time.monotonic()
        values = dict(client.key_value_dir_get(_PREFIX))
        silent: list[int] = []
        longest = 0.0
        for p in range(jax.process_count()):
            key = f"{_PREFIX}{p}"
            value = values.get(key, "")
            if key not in self._seen or self._seen[key][0] != value:
                self._seen[key] = (value, now)
            quiet = now - self._seen[key][1]
            if p != jax.process_index() and quiet > self.timeout_s:
                silent.append(p)
                longest = max(longest, quiet)
        return silent, longest

    def _loop(self) -> None:
        client = _client()
        while not self._stop.is_set():
            self._beat += 1
            try:
                client.key_value_set(f"{_PREFIX}{jax.process_index()}", str(self._beat), allow_overwrite=True)
                lost, quiet = self._silent(client) if self.armed else ([], 0.0)
            except Exception:  # the coordination service is gone; JAX reports that itself
                lost, quiet = [], 0.0
            if lost and self.armed:
                message = describe_loss(lost, self.last_checkpoint(), quiet)
                # stderr, not logging: the process ends on the next line whatever logging is set up
                print(f"brax_train: error: {message}", file=sys.stderr, flush=True)
                os._exit(EXIT_PEER_LOST)
            self._stop.wait(self.poll_s)


_watchdog: _Watchdog | None = None


def watch_peers(
    last_checkpoint: Callable[[], str | None] = lambda: None,
    timeout_s: float = DEFAULT_PEER_TIMEOUT_S,
    poll_s: float = 1.0,
) -> None:
    """Arm the lost-peer watchdog of a multi-process run (no-op in one process); `unwatch_peers` ends it."""
    global _watchdog
    if jax.process_count() == 1:
        return
    if _watchdog is None:
        _watchdog = _Watchdog(timeout_s, poll_s)
    _watchdog.arm(last_checkpoint)


def settle() -> None:
    """Wait as long as the armed watchdog needs to detect a lost peer (which ends the process)."""
    if _watchdog is not None and _watchdog.armed:
        time.sleep(_watchdog.timeout_s + 3 * _watchdog.poll_s)


def unwatch_peers() -> None:
    """Disarm the watchdog: the processes are done with collectives and may exit in any order."""
    if _watchdog is not None:
        _watchdog.disarm()


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: int | Sequence[int] | None = None,
    initialization_timeout_s: int = 300,
) -> None:
    """`jax.distributed.initialize` for training, plus the lost-peer watchdog; call before any JAX work.

    Arguments left None come from the environment as JAX reads it (`JAX_COORDINATOR_ADDRESS`, Slurm,
    Open MPI). The watchdog is armed until the first training run ends. Calling it again is a no-op.
    """
    if _client() is None:
        jax.distributed.initialize(
            coordinator_address,
            num_processes,
            process_id,
            local_device_ids=local_device_ids,
            initialization_timeout=initialization_timeout_s,
        )
        logger.info(
            "process %d of %d; %d local of %d devices",
            jax.process_index(),
            jax.process_count(),
            jax.local_device_count(),
            jax.device_count(),
        )
    watch_peers()


def barrier(name: str) -> None:
    """Wait until every process reaches the barrier `name` (no-op in a single process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def to_host(tree: Any) -> Any:
    """Every leaf of `tree` as a numpy array of its global value (a collective: every process calls it)."""
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


__all__ = [
    "DEFAULT_PEER_TIMEOUT_S",
    "EXIT_PEER_LOST",
    "barrier",
    "describe_loss",
    "initialize",
    "is_primary",
    "settle",
    "to_host",
    "unwatch_peers",
    "watch_peers",
]
