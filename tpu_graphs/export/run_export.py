"""What a training run exports after each improvement: its serving SavedModel as <run>/export, with
the task's per-graph preprocessing (layout pruning) inside, and the native library a user compiled
from an earlier export (export/native/, aot/native_library.py) kept current. A rerun never deletes
what a user built: the library is carried into the new export and compiled again only where the
weights changed (a run trained on after it was compiled).

Here rather than in saved_model.py, which native_library.py builds on."""

from __future__ import annotations

import tensorflow as tf

from tpu_graphs.data import storage
from tpu_graphs.export import saved_model
from tpu_graphs.export.aot import native_library
from tpu_graphs.train import calibration, tasks


def export_to_run_directory(scorer: tf.keras.Model, task: tasks.Task, run_dir) -> None:
  """A trainer.ModelExporter: <run_dir>/export with the run's calibration.json, its native/ kept
  and current."""
  export_dir = storage.join(run_dir, saved_model.EXPORT_DIR_NAME)
  saved_model.export(scorer, task.kind, export_dir, task.structure_transform, keep=[native_library.NATIVE_DIR_NAME])
  calibration.copy(run_dir, export_dir)
  native_library.compile_again_if_stale(export_dir)
