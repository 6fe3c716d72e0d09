"""A picture of the cluster for ``render_mode="rgb_array"``: one row per observation slot, so a
video of an episode shows load moving between instances.

Layout (``FRAME_WIDTH`` x (``HEADER_PX`` + slots x ``ROW_PX``) pixels, uint8 RGB):

- header: the episode's progress, finished requests / ``episode_requests``, as a white bar;
- per slot, left to right: the instance's state (``STATE_COLOURS``; black for an empty slot),
  its KV cache use (blue bar, full width = every block used), and its requests, one pixel each:
  running (green), then waiting (orange), then swapped (red), cut at the row's end.
"""

from __future__ import annotations

import numpy as np

from simulator.cluster import Cluster
from simulator.instance import Lifecycle

FRAME_WIDTH = 480
HEADER_PX = 8
ROW_PX = 16
STATE_PX = 16
KV_PX = 160
GAP_PX = 8
REQUESTS_PX = FRAME_WIDTH - STATE_PX - KV_PX - 2 * GAP_PX
BACKGROUND = (24, 24, 24)
STATE_COLOURS = {
    Lifecycle.STARTING: (230, 200, 40),
    Lifecycle.SERVING: (60, 180, 75),
    Lifecycle.DRAINING: (245, 130, 48),
    Lifecycle.STOPPED: (128, 128, 128),
}
KV_COLOUR = (0, 130, 200)
RUNNING_COLOUR, WAITING_COLOUR, SWAPPED_COLOUR = (60, 180, 75), (245, 130, 48), (230, 25, 75)


def _bar(row: np.ndarray, start_px: int, length_px: int, limit_px: int, colour: tuple[int, int, int]) -> int:
    """Paint ``length_px`` pixels from ``start_px`` (not past ``limit_px``); returns the end."""
    end = min(start_px + max(length_px, 0), limit_px)
    row[:, start_px:end] = colour
    return end


def cluster_frame(cluster: Cluster, slot_instance_ids: list[int | None], slots: int, episode_requests: int) -> np.ndarray:
    """The cluster's state as an RGB image (module docstring) with ``slots`` rows; row k shows
    ``slot_instance_ids[k]``, the instance in the observation's row k (None: empty)."""
    frame = np.empty((HEADER_PX + slots * ROW_PX, FRAME_WIDTH, 3), dtype=np.uint8)
    frame[:] = BACKGROUND
    done_px = FRAME_WIDTH * min(len(cluster.outcomes), episode_requests) // max(episode_requests, 1)
    _bar(frame[1:HEADER_PX - 1], 0, done_px, FRAME_WIDTH, (255, 255, 255))
    for slot, instance_id in enumerate(slot_instance_ids[:slots]):
        if instance_id is None:
            continue
        instance = cluster.instances[instance_id]
        top = HEADER_PX + slot * ROW_PX
        row = frame[top + 1:top + ROW_PX - 1]
        row[:, :STATE_PX] = STATE_COLOURS[instance.lifecycle]
        kv_start = STATE_PX + GAP_PX
        kv_px = round(KV_PX * instance.kv.used_blocks / instance.kv.total_blocks)
        _bar(row, kv_start, kv_px, kv_start + KV_PX, KV_COLOUR)
        start = kv_start + KV_PX + GAP_PX
        for count, colour in ((len(instance.running), RUNNING_COLOUR), (len(instance.waiting), WAITING_COLOUR),
                              (len(instance.swapped), SWAPPED_COLOUR)):
            start = _bar(row, start, count, FRAME_WIDTH, colour)
    return frame
