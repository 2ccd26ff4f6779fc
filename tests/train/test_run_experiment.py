"""What a run saves of its data (data_derived.json): read back exactly, refused naming the file where
it is damaged. A whole run exported without its data: tests/export/test_saved_model.py; runs end to end:
tests/train/test_trainer.py, tests/programs/test_quickstart.py."""

import json
import sys

import numpy as np
import pytest

from tpu_graphs.data import errors, graphs
from tpu_graphs.train import experiments, run_directory, run_experiment


def test_what_a_run_takes_from_its_data_reads_back_exactly(tmp_path):
  rng = np.random.default_rng(0)
  statistics = tuple(rng.standard_normal(graphs.NODE_FEATURE_WIDTH).astype(np.float32) for _ in range(2))
  run_experiment.write_data_derived(tmp_path, experiments.DataDerived(statistics, 256))
  read = run_experiment.read_data_derived(tmp_path)
  assert read.segment_size == 256
  for written, read_back in zip(statistics, read.feature_statistics):
    assert read_back.dtype == np.float32 and np.array_equal(read_back, written)
  run_experiment.write_data_derived(tmp_path, experiments.DataDerived())
  assert run_experiment.read_data_derived(tmp_path) == experiments.DataDerived()


@pytest.mark.parametrize("content, problem", [
    ("{", r"JSONDecodeError"),
    (json.dumps({"segment_size": None}), r"KeyError: 'feature_statistics'"),
    (json.dumps({"segment_size": 0, "feature_statistics": None}), r"segment_size 0 is no positive integer"),
    (json.dumps({"segment_size": None, "feature_statistics": {"mean": [0.0], "deviation": [1.0]}}),
     r"feature statistics of shape \(1,\), not \(140,\)"),
])
def test_a_damaged_data_derived_file_is_refused_naming_it(tmp_path, content, problem):
  (tmp_path / run_experiment.DATA_DERIVED_FILE).write_text(content)
  with pytest.raises(run_directory.RunDirectoryError,
                     match=rf"{run_experiment.DATA_DERIVED_FILE}: damaged \(.*{problem}"):
    run_experiment.read_data_derived(tmp_path)



def test_a_run_whose_config_records_no_experiment_is_refused_naming_its_config_file(tmp_path):
  """A run copied elsewhere: the message names the copy's config.json, not the folder it was trained in."""
  with pytest.raises(errors.InputError, match=rf"^{tmp_path / 'config.json'}: records no experiment with a data root "
                                              r"\(a run of an older version\); train it again$"):
    run_experiment.run_model_builder(tmp_path, {"out_dir": "/somewhere/else", "model": {}})

if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
