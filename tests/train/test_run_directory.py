"""A run directory's checks: a rerun configured otherwise is refused naming each difference, a
damaged config.json naming the file. Resuming damaged directories end to end: tests/programs/test_training_program_faults.py."""

import json
import pathlib
import sys

import pytest
import tensorflow as tf

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


def _small_checkpoints(directory: pathlib.Path) -> None:
  """ckpt-1 and ckpt-2 of one variable (1 and 2) in `directory`, as the trainer's manager keeps them."""
  variable = tf.Variable(0.0)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), str(directory), max_to_keep=2)
  for number in (1, 2):
    variable.assign(float(number))
    manager.save(checkpoint_number=number)



def test_damaged_checkpoint_state_file_is_rewritten_rather_than_restarting_the_run(tmp_path):
  _small_checkpoints(tmp_path)
  (tmp_path / "checkpoint").write_text("garbage {")  # TensorFlow alone would ignore it: no checkpoint
  assert run_directory.newest_intact_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")
  assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")



def test_damaged_newest_checkpoint_gives_the_previous_one(tmp_path):
  _small_checkpoints(tmp_path)
  index = tmp_path / "ckpt-2.index"
  index.write_bytes(index.read_bytes()[:len(index.read_bytes()) // 2])
  assert run_directory.newest_intact_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-1")
  assert tf.train.load_checkpoint(str(tmp_path / "ckpt-1")).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE") == 1.0


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
