"""The app's own folders stay bounded (issue 9, rows 4 and 8): pruning by age and size, the hosting limits."""
from __future__ import annotations

import os
import time
from pathlib import Path

from mmvet_core.hosting.policy import HostingLimits, Housekeeper
from mmvet_core.inputs.housekeeping import FolderPolicy, make_room, prune, tree_size


def entry(root: Path, name: str, size: int, age_s: float) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "f.bin").write_bytes(bytes(size))
    then = time.time() - age_s
    os.utime(d, (then, then))
    return d


def test_old_entries_are_removed(tmp_path):
    old, new = entry(tmp_path, "old", 10, 7200), entry(tmp_path, "new", 10, 120)
    report = prune(tmp_path, FolderPolicy(max_age_s=3600))
    assert report.removed == ["old"] and not old.exists() and new.exists()


def test_the_oldest_go_first_until_the_folder_fits(tmp_path):
    a, b, c = (entry(tmp_path, n, 1000, age) for n, age in (("a", 900), ("b", 600), ("c", 300)))
    report = prune(tmp_path, FolderPolicy(max_bytes=2000))
    assert report.removed == ["a"] and report.total_bytes == 2000 and b.exists() and c.exists()
    assert make_room(tmp_path, FolderPolicy(max_bytes=2000), 1000) and [p.name for p in tmp_path.iterdir()] == ["c"]


def test_what_is_in_use_right_now_is_kept(tmp_path):
    busy = entry(tmp_path, "busy", 5000, 1)
    assert not make_room(tmp_path, FolderPolicy(max_bytes=1000, min_age_s=60), 10)
    assert busy.exists() and tree_size(tmp_path) == 5000


def test_housekeeper_runs_at_most_every_period(tmp_path):
    keeper = Housekeeper({tmp_path: FolderPolicy(max_age_s=3600)}, every_s=300)
    entry(tmp_path, "old", 10, 7200)
    assert keeper.maybe_run()[str(tmp_path)].removed == ["old"]
    entry(tmp_path, "old2", 10, 7200)
    assert keeper.maybe_run() is None and (tmp_path / "old2").exists()      # too soon: nothing scanned


def test_hosting_limits_from_the_environment():
    lim = HostingLimits.from_env({"MMVET_MAX_UPLOAD_MB": "10", "MMVET_ARCHIVE_FACTOR": "3", "MMVET_MAX_ROWS": "500",
                                  "MMVET_HUB_MAX_MB": "bad", "MMVET_MAX_PARSES": "0"})
    assert lim.load_limits().archive.max_total_uncompressed == 30 * 1024 * 1024
    assert lim.parse_limits().max_rows == 500 and lim.parse_limits().max_parallel == 1
    assert lim.hub_max_mb == 500                                                   # a bad value keeps the default
    assert lim.gradio_delete_cache() == (1800, 7200)
