"""A run directory's checks: a rerun configured otherwise is refused naming each difference, a
damaged config.json naming the file. Resuming damaged directories end to end: tests/test_faults.py."""

import json
import sys

import pytest

from tpu_graphs.train import run_directory


def test_resuming_a_run_configured_otherwise_is_refused_naming_each_difference(tmp_path):
  recorded = {"epochs": 3, "batch_size": 4, "train_dir": "a", "model": {"units": 16, "join": "late"}}
  (tmp_path / "config.json").write_text(json.dumps(recorded))
  run_directory.check_resumable(tmp_path, {**recorded, "epochs": 10, "train_dir": "b"})  # longer, data moved: resumable
  with pytest.raises(run_directory.RunDirectoryError,
                     match=r"config\.json: this run was configured otherwise \(batch_size 4 -> 8; model\.units 16 -> 32\)"):
    run_directory.check_resumable(tmp_path, {**recorded, "batch_size": 8, "model": {"units": 32, "join": "late"}})
  (tmp_path / "config.json").write_text("{")
  with pytest.raises(run_directory.RunDirectoryError, match=r"config\.json: damaged \(JSONDecodeError: .*\); delete .* to start over"):
    run_directory.check_resumable(tmp_path, recorded)


def test_a_run_recorded_with_task_settings_by_an_older_version_still_resumes(tmp_path):
  # Older versions wrote the model's prune_hops a second time, as task_settings; it is no longer written.
  wanted = {"epochs": 3, "model": {"prune_hops": 0}}
  (tmp_path / "config.json").write_text(json.dumps({**wanted, "task_settings": {"prune_hops": 0}}))
  run_directory.check_resumable(tmp_path, wanted)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
