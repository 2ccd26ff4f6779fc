"""The submission validator accepts a complete, well-formed submission and names each bad row."""

import dataclasses
import json
import os
import re
import sys

import numpy as np
import pytest

import sample_data
import tile_test_data
from baselines import submission
from tpu_graphs.data import npz, predictions

TILE_IDS = {"0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb": 32, "0a3585c3e686065389227fa374175e48": 1282,
            "0a8a2b247d7a20b9dcab1daf50066a4d": 807, "0abaea94d7b0a1c1f1b0bd23b73ce38c": 52,
            "0ac539372cc77cc6791794b369b984e1": 2951, "d6f5f54247bd1e58a10b9e7062c636ab": 25}
LAYOUT_IDS = {"layout:nlp:default:3a0c5517a87df8d82fd637b83298a3ba": 1001,
              "layout:nlp:random:23559853d9702baaaacbb0c83fd32266": 1000,
              "layout:xla:default:cd708819d3f5103afd6460b15e74eaf3": 1000,
              "layout:xla:random:cd708819d3f5103afd6460b15e74eaf3": 1000}


@pytest.fixture(scope="module")
def data_root():
  return sample_data.require_sample("npz")


def good_rows():
  rows = [f"tile:xla:{g},{';'.join(str(i) for i in range(5))}" for g in TILE_IDS]
  rows += [f"{row_id},{';'.join(str(i) for i in reversed(range(n)))}" for row_id, n in LAYOUT_IDS.items()]
  return rows


def write_csv(path, rows, header="ID,TopConfigs"):
  path.write_text("\n".join([header] + rows) + "\n")
  return path


def test_counts_every_test_graph_of_the_sample(data_root):
  counts = submission.test_config_counts(data_root)
  assert counts == {**{f"tile:xla:{g}": n for g, n in TILE_IDS.items()}, **LAYOUT_IDS}


def test_valid_submission_is_combined_in_collection_order(data_root, tmp_path):
  rows = good_rows()
  first = write_csv(tmp_path / "tile.csv", rows[:6])
  second = write_csv(tmp_path / "layout.csv", rows[6:][::-1])
  assert submission.combine([first, second], data_root, tmp_path / "out/submission.csv") == 10
  written = (tmp_path / "out/submission.csv").read_text().splitlines()
  assert written[0] == "ID,TopConfigs" and len(written) == 11
  assert [line.split(":")[0] + ":" + line.split(":")[1] for line in written[1:]][:6] == ["tile:xla"] * 6
  assert written[7].startswith("layout:xla:default:") and written[10].startswith("layout:nlp:random:")


def test_written_rows_are_the_predictions_rankings_in_their_given_order(data_root, tmp_path):
  # Rankings in no sorted order, so that a reversed, sorted or shifted ranking differs from them.
  rng = np.random.default_rng(7)
  expected = {f"tile:xla:{g}": [int(i) for i in rng.permutation(n)[:5]] for g, n in TILE_IDS.items()}
  expected.update({row_id: [int(i) for i in rng.permutation(n)] for row_id, n in LAYOUT_IDS.items()})
  rows = [f"{row_id},{';'.join(map(str, ranking))}" for row_id, ranking in expected.items()]
  path = write_csv(tmp_path / "predictions.csv", rows)
  assert submission.combine([path], data_root, tmp_path / "submission.csv") == 10
  written = (tmp_path / "submission.csv").read_text().splitlines()
  assert written[0] == "ID,TopConfigs"
  assert {line.split(",")[0]: [int(i) for i in line.split(",")[1].split(";")] for line in written[1:]} == expected


@pytest.mark.parametrize("mutate, message", [
    (lambda rows: rows[1:], r"1 test graph\(s\) missing"),
    (lambda rows: rows + rows[:1], "appears more than once"),
    (lambda rows: rows + ["tile:xla:ffff,0;1;2;3;4"], "no such test graph"),
    (lambda rows: ["tile:xla:0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb,0;1;2;3"] + rows[1:], "lists 4 configs, needs 5"),
    (lambda rows: ["tile:xla:0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb,0;1;2;3;32"] + rows[1:], "index 32 is out of range"),
    (lambda rows: ["tile:xla:0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb,0;1;2;3;3"] + rows[1:], "more than once"),
    (lambda rows: rows[:6] + ["layout:nlp:random:23559853d9702baaaacbb0c83fd32266,0;1;2"] +
     [r for r in rows[6:] if "nlp:random" not in r], "ranks 3 of 1000 configs"),
])
def test_each_malformed_case_is_rejected(data_root, tmp_path, mutate, message):
  path = write_csv(tmp_path / "bad.csv", mutate(good_rows()))
  with pytest.raises(submission.SubmissionError, match=message) as caught:
    submission.combine([path], data_root, tmp_path / "submission.csv")
  assert str(caught.value).startswith(f"submission from {path}: "), caught.value  # names the file, and the row
  assert "missing" in message or re.match(r"[^:]*: row (tile|layout):", str(caught.value)), caught.value
  assert not (tmp_path / "submission.csv").exists()


def test_prediction_file_that_is_not_utf8_is_named(tmp_path):
  (tmp_path / "runs/a").mkdir(parents=True)
  (tmp_path / "runs/a/predictions.csv").write_bytes("ID,TopConfigs\ntile:xla:caf\xe9,0;1;2;3;4\n".encode("latin-1"))
  with pytest.raises(predictions.PredictionFileError, match=r"a/predictions\.csv: not UTF-8 text"):
    submission.newest_prediction_files(tmp_path / "runs")


def test_nothing_to_validate_against_or_to_combine_writes_nothing(data_root, tmp_path):
  (tmp_path / "empty").mkdir()
  path = write_csv(tmp_path / "tile.csv", good_rows()[:6])
  with pytest.raises(submission.SubmissionError, match=r"empty: no test-split \.npz files"):
    submission.combine([path], tmp_path / "empty", tmp_path / "submission.csv")
  with pytest.raises(submission.SubmissionError, match="no prediction files"):
    submission.combine([], data_root, tmp_path / "submission.csv")
  assert not (tmp_path / "submission.csv").exists()


def test_only_the_five_collections_test_files_are_counted_and_a_kaggle_id_is_printable(tmp_path):
  rng = np.random.default_rng(0)
  for relative, graph_id in [("tile/xla/test", "k1"), ("tile/xla/train", "k2"), ("tile/own/test", "p")]:
    graph = tile_test_data.tile_graph(rng, graph_id, relative.rsplit("/", 1)[1], num_configs=7)
    npz.write_graph(tmp_path / relative / f"{graph_id}.npz", dataclasses.replace(graph, collection="tile:xla"))
  assert submission.test_config_counts(tmp_path) == {"tile:xla:k1": 7}
  spaced = tile_test_data.tile_graph(rng, "a b", "test", num_configs=3)
  npz.write_graph(tmp_path / "tile/xla/test/a b.npz", spaced)
  with pytest.raises(submission.SubmissionError, match=r"a b\.npz: graph id 'a b' \(the file name\) cannot be in a "
                     "Kaggle submission"):
    submission.test_config_counts(tmp_path)


def write_run(root, name, rows):
  (root / name).mkdir(parents=True)
  return write_csv(root / name / "predictions.csv", rows)


def test_newest_run_per_collection(tmp_path):
  old = write_run(tmp_path, "a", ["tile:xla:x,0"])
  new = write_run(tmp_path, "b", ["tile:xla:y,0"])
  layout = write_run(tmp_path, "c", ["layout:nlp:random:z,0"])
  os.utime(old, (1, 1))
  assert submission.newest_prediction_files(tmp_path) == {"tile:xla": new, "layout:nlp:random": layout}


def test_empty_prediction_files_are_passed_over_and_a_bad_id_is_named(tmp_path):
  write_run(tmp_path, "empty", [])
  kept = write_run(tmp_path, "kept", ["tile:xla:x,0"])
  assert submission.newest_prediction_files(tmp_path) == {"tile:xla": kept}
  write_run(tmp_path, "bad", ["tiles:x,0"])
  with pytest.raises(submission.SubmissionError, match=r"bad/predictions\.csv: row 2: ID 'tiles:x'"):
    submission.newest_prediction_files(tmp_path)


def test_runs_without_a_readable_config_are_passed_over_by_name_and_the_next_taken(tmp_path):
  write_run(tmp_path, "a_unrecorded", ["tile:xla:x,0"])
  write_run(tmp_path, "b_broken", ["tile:xla:x,0"])
  (tmp_path / "b_broken/config.json").write_text("{")
  good = write_run(tmp_path, "c_good", ["tile:xla:x,0"])
  (tmp_path / "c_good/config.json").write_text(json.dumps({"experiment": {"collection": "tile:xla",
                                                                          "data_root": str(tmp_path / "npz")}}))
  taken, passed_over = submission.runs_trained_on(tmp_path, tmp_path / "npz")
  assert taken == [good]
  assert passed_over == [f"{tmp_path / 'a_unrecorded/predictions.csv'}: no config.json beside it records its data root",
                         f"{tmp_path / 'b_broken/predictions.csv'}: its config.json is unreadable "
                         "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"]


def test_only_runs_trained_on_the_data_root_are_taken_and_the_others_are_named(tmp_path):
  release, generated = tmp_path / "release/npz", tmp_path / "generated/npz"
  runs = tmp_path / "runs"
  trained = {"real_tile": release, "generated_tile": generated}
  for name, data_root in trained.items():
    write_run(runs, name, ["tile:xla:x,0"])
    (runs / name / "config.json").write_text(json.dumps({"experiment": {"collection": "tile:xla",
                                                                        "data_root": str(data_root)}}))
  write_run(runs, "unrecorded", ["tile:xla:x,0"])
  os.utime(runs / "real_tile/predictions.csv", (1, 1))  # older than the generated run: still the one taken
  taken, passed_over = submission.runs_trained_on(runs, release)
  assert taken == [runs / "real_tile/predictions.csv"]
  assert passed_over == [f"{runs / 'generated_tile/predictions.csv'}: trained on {generated}, not {release}",
                         f"{runs / 'unrecorded/predictions.csv'}: no config.json beside it records its data root"]
  assert submission.newest_prediction_files(runs, taken) == {"tile:xla": runs / "real_tile/predictions.csv"}


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
