"""Merges the per-collection prediction CSVs into one validated Kaggle submission.

  python baselines/combine_csvs.py --runs_dir out --output submission.csv
  python baselines/combine_csvs.py --runs_dir out --data_root ~/data/tpugraphs/npz --output submission.csv
  python baselines/combine_csvs.py --predictions a.csv,b.csv --data_root ~/data/tpugraphs/npz

By default, of the runs under --runs_dir that trained on --data_root (their config.json records
it), the newest predictions.csv of each collection is taken; the program names the run it took
for each collection and every run it passed over, with the reason. Nothing is written unless every
test graph of --data_root has exactly one well-formed row.
"""

import pathlib

from absl import flags

from baselines import program
from baselines import submission
from tpu_graphs.data import errors, graphs, locations
from tpu_graphs.train import run_experiment

_RUNS_DIR = flags.DEFINE_string("runs_dir", "runs", "Run directories to take the newest predictions from.")
_PREDICTIONS = flags.DEFINE_list("predictions", None, "Explicit prediction CSVs (instead of --runs_dir).")
_DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ),
                                 "The npz tree whose test files the submission must cover; from --runs_dir only runs "
                                 "trained on it are taken.")
_OUTPUT = flags.DEFINE_string("output", "submission.csv", "Where the submission goes.")


def main(argv):
  del argv
  if _PREDICTIONS.value:
    files = _PREDICTIONS.value
  else:
    if not pathlib.Path(_RUNS_DIR.value).is_dir():
      raise errors.InputError(f"{_RUNS_DIR.value}: no such folder; pass --runs_dir=<the folder of your runs> or "
                              "--predictions")
    trained_here, passed_over = submission.runs_trained_on(_RUNS_DIR.value, _DATA_ROOT.value)
    for line in passed_over:
      print(f"passed over {line}")
    if not trained_here:
      found = (f"{len(passed_over)} predictions.csv found, none of a run trained on "
               f"{run_experiment.data_root_name(_DATA_ROOT.value)}: {'; '.join(passed_over)}" if passed_over else
               "no predictions.csv below it; train a model per collection there (or pass --predictions)")
      raise errors.InputError(f"{_RUNS_DIR.value}: {found}")
    newest = submission.newest_prediction_files(_RUNS_DIR.value, trained_here)
    for collection in graphs.COLLECTIONS:
      print(f"{collection:20s} {newest.get(collection, f'(no run under {_RUNS_DIR.value} trained on this data root)')}")
    files = list(newest.values())
  program.refuse_overwriting_inputs("output", _OUTPUT.value, [*map(str, files), _DATA_ROOT.value])
  rows = submission.combine(files, _DATA_ROOT.value, _OUTPUT.value)
  print(f"wrote {_OUTPUT.value}: {rows} rows, validated against the test files of {_DATA_ROOT.value}")


if __name__ == "__main__":
  program.run(main)
