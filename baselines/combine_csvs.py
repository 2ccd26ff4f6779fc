"""Merges the per-collection prediction CSVs into one validated Kaggle submission.

  python baselines/combine_csvs.py --runs_dir runs --output submission.csv
  python baselines/combine_csvs.py --predictions a.csv,b.csv --data_root ~/data/tpugraphs/npz

By default the newest predictions.csv of each collection under --runs_dir is taken. Nothing is
written unless every test graph of --data_root has exactly one well-formed row.
"""

from absl import flags

from tpu_graphs import programs
from tpu_graphs.data import graphs, locations
from tpu_graphs.export import submission

_RUNS_DIR = flags.DEFINE_string("runs_dir", "runs", "Run directories to take the newest predictions from.")
_PREDICTIONS = flags.DEFINE_list("predictions", None, "Explicit prediction CSVs (instead of --runs_dir).")
_DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ),
                                 "The npz tree whose test files the submission must cover.")
_OUTPUT = flags.DEFINE_string("output", "submission.csv", "Where the submission goes.")


def main(argv):
  del argv
  if _PREDICTIONS.value:
    files = _PREDICTIONS.value
  else:
    newest = submission.newest_prediction_files(_RUNS_DIR.value)
    for collection in graphs.COLLECTIONS:
      print(f"{collection:20s} {newest.get(collection, '(no run found)')}")
    files = list(newest.values())
  programs.refuse_overwriting_inputs("output", _OUTPUT.value, [*map(str, files), _DATA_ROOT.value])
  rows = submission.combine(files, _DATA_ROOT.value, _OUTPUT.value)
  print(f"wrote {_OUTPUT.value}: {rows} rows, validated against the test files of {_DATA_ROOT.value}")


if __name__ == "__main__":
  programs.run(main)
