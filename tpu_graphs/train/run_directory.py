"""A training run's directory: what it holds, and how a rerun verifies and resumes it.

    config.json     the run's settings (trainer.run_configuration); a rerun configured otherwise is
                    refused (check_resumable)
    checkpoints/    ckpt-<n> after epoch n: weights, optimizer, epoch and early-stopping state
    history.json    one entry per finished epoch: losses and validation metrics
    best/           the best epoch's weights (normalization statistics included)
    logs/           TensorBoard
    metrics.json    the best weights on validation, per graph and mean
    predictions.csv the test split's ranked configs (ID,TopConfigs), where there is one
    export/         what the run's exporters add: the serving SavedModel on plain tensors (tpu_graphs/export)
    data_derived.json, records/, dedup/: what an experiment's run adds (train/run_experiment.py)

Every file is written atomically (data/storage.py). A damaged directory resumes from the newest
checkpoint whose tensors verify, or is refused naming the damaged file (RunDirectoryError), never
silently restarted or finished with another epoch's weights.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Optional

import tensorflow as tf

from tpu_graphs.data import errors, storage


class RunDirectoryError(errors.InputError):
  """A run directory that cannot be resumed or read: its config.json is of another run, or one of
  its files (config.json, history.json, a checkpoint, best/) is damaged."""


def _start_over(run_dir) -> str:
  return f"delete {run_dir} (or pass another --out_dir) to start over"


# config.json entries a rerun may change and still resume the run: how long it trains, how it
# reports, and where its data and directory are. Any other change would resume weights, optimizer
# state and stopping state that another configuration produced.
RESUMABLE_CHANGES = frozenset({"epochs", "patience", "verbose", "train_dir", "valid_dir", "test_dir", "out_dir",
                               "experiment.data_root"})
# config.json entries older versions wrote that repeat a setting recorded elsewhere (task_settings:
# the model's prune_hops), no longer written and not compared, so that their runs still resume.
RETIRED_ENTRIES = frozenset({"task_settings"})


def read_run_json(run_dir, name: str, kind: type):
  """The content of <run_dir>/<name>, of type `kind`; None if there is none yet; RunDirectoryError
  if it is damaged (truncated, not JSON, not a `kind`)."""
  path = storage.join(run_dir, name)
  try:
    content = json.loads(storage.read_text(path))
  except FileNotFoundError:
    return None
  except (OSError, ValueError, tf.errors.OpError) as error:
    raise RunDirectoryError(f"{path}: damaged ({type(error).__name__}: {error}); {_start_over(run_dir)}") from None
  if not isinstance(content, kind):
    raise RunDirectoryError(f"{path}: damaged (holds a JSON {type(content).__name__}, not a {kind.__name__} as this "
                            f"program writes); {_start_over(run_dir)}")
  return content


def read_run_config(run_dir) -> Optional[dict]:
  """The content of <run_dir>/config.json; None if there is none yet."""
  return read_run_json(run_dir, "config.json", dict)


def finished_run_config(run_dir) -> dict:
  """The content of <run_dir>/config.json of a run that is to be read (evaluated, exported);
  RunDirectoryError naming the file where there is none."""
  run_config = read_run_config(run_dir)
  if run_config is None:
    raise RunDirectoryError(f"{storage.join(run_dir, 'config.json')}: not found; {run_dir} is no run directory of "
                            "tiles_train.py, layout_train.py or quickstart.py")
  return run_config


def read_history(run_dir, first_epoch: int) -> list:
  """The entries of <run_dir>/history.json of the epochs before `first_epoch` (those the resumed
  checkpoint has done); every one of them must be there."""
  history = read_run_json(run_dir, "history.json", list) or []
  path = storage.join(run_dir, "history.json")
  kept = [entry for entry in history if isinstance(entry, dict) and isinstance(entry.get("epoch"), int)
          and entry["epoch"] < first_epoch]
  if [entry["epoch"] for entry in kept] != list(range(first_epoch)):
    raise RunDirectoryError(f"{path}: damaged (epochs {[entry['epoch'] for entry in kept]} are recorded, the "
                            f"checkpoint has done {first_epoch}); {_start_over(run_dir)}")
  return kept


def _tensors_readable(prefix: str) -> Optional[str]:
  """Why the checkpoint at `prefix` cannot be restored (its index or data unreadable, a checksum
  that does not match), or None. Reading every tensor checks every checksum."""
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)  # load_checkpoint takes ram:// prefixes for folders
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as error:  # IndexError: data file too short
    return str(getattr(error, "message", error)).splitlines()[0]
  return None


def checkpoint_numbers(directory) -> list[int]:
  """The numbers n of the checkpoints ckpt-<n> in `directory`, ascending, from their index files
  (not from the state file, which may be damaged)."""
  return sorted(int(match.group(1)) for name in tf.io.gfile.glob(storage.join(directory, "ckpt-*.index"))
                if (match := re.fullmatch(r"ckpt-(\d+)\.index", storage.base_name(name))))


def newest_intact_checkpoint(directory) -> Optional[str]:
  """The prefix of the newest checkpoint in `directory` (ckpt-<n>) whose tensors all read back,
  else None if there is none at all; a damaged newer one is warned of and passed over (the
  manager keeps the previous one until the next is complete). Raises RunDirectoryError if there
  are checkpoints but none is intact.

  The checkpoint state file is rewritten to name what was found where it names something else or
  is damaged: TensorFlow ignores a damaged one, which would silently restart the run from its
  first epoch.
  """
  numbers = checkpoint_numbers(directory)[::-1]
  damaged = []
  for number in numbers:
    prefix = storage.join(directory, f"ckpt-{number}")
    problem = _tensors_readable(prefix)
    if problem is None:
      if damaged:
        logging.warning("%s; resuming from %s", "; ".join(damaged), prefix)
      try:
        state = tf.train.get_checkpoint_state(directory)
      except (tf.errors.OpError, ValueError):
        state = None
      if state is None or state.model_checkpoint_path != prefix:
        older = [storage.join(directory, f"ckpt-{n}") for n in sorted(numbers) if n <= number]
        tf.compat.v1.train.update_checkpoint_state(directory, prefix, all_model_checkpoint_paths=older)
      return prefix
    damaged.append(f"{prefix}: damaged ({problem})")
  if damaged:
    raise RunDirectoryError(f"{'; '.join(damaged)}; no intact checkpoint is left: "
                            f"{_start_over(storage.parent(directory))}")
  return None


def check_best_weights(run_dir, best_epoch: int) -> None:
  """Raises RunDirectoryError if the run has a best epoch whose weights (best/) are missing or damaged:
  the final model would silently be another epoch's."""
  prefix = storage.join(run_dir, "best", "weights")
  if best_epoch < 0 and not tf.io.gfile.exists(prefix + ".index"):
    return
  previous = storage.join(run_dir, ".best.old")  # where a kill between atomic_directory's renames left it
  if not tf.io.gfile.exists(prefix + ".index") and storage.is_local(previous) and tf.io.gfile.exists(previous):
    tf.io.gfile.rename(previous, storage.join(run_dir, "best"))
  problem = _tensors_readable(prefix) if tf.io.gfile.exists(prefix + ".index") else "missing"
  if problem:
    raise RunDirectoryError(f"{prefix}: damaged ({problem}); the weights of the best epoch {best_epoch} are lost: "
                            f"{_start_over(run_dir)}")


def check_initial_weights(run_dir) -> str:
  """The prefix of the best weights of the run in `run_dir`; RunDirectoryError if it has none or
  they are damaged."""
  prefix = storage.join(run_dir, "best", "weights")
  problem = _tensors_readable(prefix) if tf.io.gfile.exists(prefix + ".index") else "missing: the run has no best epoch"
  if problem:
    raise RunDirectoryError(f"{prefix}: cannot initialise from it ({problem})")
  return prefix


def initialise_from_run(scorer: tf.keras.Model, run_dir) -> None:
  """Sets every weight of `scorer` to the best weights of the run in `run_dir` (its best/weights,
  normalization statistics included); RunDirectoryError if that run has none, they are damaged, or
  they are not a model of this one's variables and shapes."""
  prefix = check_initial_weights(run_dir)
  try:
    scorer.load_weights(prefix).assert_existing_objects_matched()
  except (AssertionError, ValueError) as error:
    raise RunDirectoryError(f"{prefix}: cannot initialise from it, its model differs from this run's "
                            f"({str(error).splitlines()[0]}); pretrain and fine-tune with the same model settings") from None


def _flat(run_config: dict) -> dict:
  """{"model.units": 64, ...}: nested settings (model, experiment) as keys of their own."""
  return {f"{key}.{inner}" if isinstance(value, dict) else key: inner_value
          for key, value in run_config.items()
          for inner, inner_value in (value.items() if isinstance(value, dict) else [(None, value)])}


def check_resumable(run_dir, run_config: dict) -> None:
  """Raises RunDirectoryError, naming each difference, if run_dir holds a run configured otherwise
  than `run_config` (beyond RESUMABLE_CHANGES). Call it before writing anything into run_dir."""
  recorded = read_run_config(run_dir)
  if recorded is None:
    return
  recorded = _flat({key: value for key, value in recorded.items() if key not in RETIRED_ENTRIES})
  wanted = _flat(json.loads(json.dumps(run_config)))  # as written: tuples become lists
  # Compared as JSON text, so that a NaN recorded (by an older version) equals itself.
  changed = [f"{key} {recorded.get(key)!r} -> {wanted.get(key)!r}" for key in sorted(set(recorded) | set(wanted))
             if key not in RESUMABLE_CHANGES and json.dumps(recorded.get(key)) != json.dumps(wanted.get(key))]
  if changed:
    raise RunDirectoryError(f"{storage.join(run_dir, 'config.json')}: this run was configured otherwise "
                            f"({'; '.join(changed)}); use another run directory or delete this one")


def epochs_done(out_dir) -> int:
  """Epochs the run in out_dir has finished and checkpointed (a rerun resumes after them; checkpoint
  n is saved after epoch n); 0 for a new run."""
  numbers = checkpoint_numbers(storage.join(out_dir, "checkpoints"))
  return numbers[-1] if numbers else 0



def write_json(path: str, content) -> None:
  """Writes one of the run's JSON files (config.json, history.json, metrics.json), atomically."""
  storage.write_text(path, json.dumps(content, indent=1, sort_keys=True) + "\n")

