"""Prediction files (`ID,TopConfigs`): rows written in order read back the same; bad rows are named."""

import sys

import pytest

from tpu_graphs.data import predictions


def write_csv(path, rows, header="ID,TopConfigs"):
  path.write_text("\n".join([header] + rows) + "\n")
  return path


def test_written_rows_read_back_in_the_order_written(tmp_path):
  rows = [predictions.Prediction("layout:nlp:random", "b", (2, 0, 1)),
          predictions.Prediction.from_row_id("tile:xla:a", (4, 3, 2, 1, 0))]
  predictions.write_predictions(tmp_path / "run/predictions.csv", rows)
  assert (tmp_path / "run/predictions.csv").read_text().splitlines() == [
      "ID,TopConfigs", "layout:nlp:random:b,2;0;1", "tile:xla:a,4;3;2;1;0"]
  assert predictions.read_predictions(tmp_path / "run/predictions.csv") == rows


def test_a_prediction_is_a_value():
  # Frozen: a row validated (baselines/submission.py) is the row written; and hashable, as a value is.
  prediction = predictions.Prediction("tile:xla", "a", (1, 0))
  assert {prediction, predictions.Prediction("tile:xla", "a", (1, 0))} == {prediction}
  with pytest.raises(AttributeError):
    prediction.ranking = (0, 1)


def test_positions_place_every_config_where_the_ranking_puts_it():
  prediction = predictions.Prediction("layout:xla:default", "g", (2, 0, 3, 1))
  assert prediction.positions(4).tolist() == [1, 3, 0, 2]
  for short_or_repeated in [(2, 0, 3), (2, 0, 3, 3)]:
    with pytest.raises(ValueError, match="layout:xla:default:g: does not rank all 4 configs once each"):
      predictions.Prediction("layout:xla:default", "g", short_or_repeated).positions(4)


@pytest.mark.parametrize("rows, header, message", [
    (["tile:xla:abc,0;1;x"], "ID,TopConfigs", "row 2: invalid literal"),
    (["tiles:xla:abc,0;1"], "ID,TopConfigs", "row 2: ID 'tiles:xla:abc' is not <collection>:<graph id>"),
    (["layout:xla:abc,0;1"], "ID,TopConfigs", "is not <collection>:<graph id>"),
    (["tile:xla:,0;1"], "ID,TopConfigs", "ID 'tile:xla:' is not <collection>:<graph id>"),  # no graph id
    (["tile:xla:abc,0,1"], "ID,TopConfigs", "row 2 has 3 fields"),
    (["tile:xla:abc,0"], "id,top", "header is"),
])
def test_malformed_rows_are_named(tmp_path, rows, header, message):
  path = write_csv(tmp_path / "bad.csv", rows, header)
  with pytest.raises(predictions.PredictionFileError, match=message) as caught:
    predictions.read_predictions(path)
  assert "bad.csv" in str(caught.value)


def test_csv_that_is_not_utf8_is_named(tmp_path):
  path = tmp_path / "latin1.csv"
  path.write_bytes("ID,TopConfigs\ntile:xla:caf\xe9,0;1;2;3;4\n".encode("latin-1"))
  with pytest.raises(predictions.PredictionFileError, match=r"latin1\.csv: not UTF-8 text"):
    predictions.read_predictions(path)


def test_a_directory_is_refused_by_name(tmp_path):
  (tmp_path / "predictions.csv").mkdir()
  with pytest.raises(predictions.PredictionFileError, match=r"predictions\.csv: a directory, not a file"):
    predictions.read_predictions(tmp_path / "predictions.csv")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
