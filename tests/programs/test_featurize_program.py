"""baselines/featurize.py writes one valid npz per module or kernel and names bad input."""

import pathlib
import subprocess
import sys

import pytest

import hang_guard
import sample_data
from tpu_graphs.data import npz

PROGRAM = pathlib.Path(__file__).resolve().parents[2] / "baselines" / "featurize.py"


def run_program(*flags):
  return subprocess.run([sys.executable, str(PROGRAM), *flags],
                        capture_output=True, text=True, timeout=hang_guard.SECONDS,
                        cwd=PROGRAM.parents[1])


def test_tile_tuning_data_becomes_15_npz_files(tmp_path):
  source = sample_data.require_sample("pb/official_testdata/op_tuning_data.pb")
  result = run_program(f"--input={source}", f"--output_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  written = sorted(tmp_path.glob("*.npz"))
  assert len(written) == 15 and (tmp_path / "fusion.232.npz") in written
  assert all(npz.read_graph(path, collection="tile:xla").num_configs >= 1 for path in written)


def test_bad_input_exits_naming_the_file(tmp_path):
  bad = tmp_path / "garbage.pb"
  bad.write_bytes(b"\xff" * 64)
  result = run_program(f"--input={bad}", f"--output_dir={tmp_path}")
  assert result.returncode != 0 and "garbage.pb" in result.stderr and "not a serialized" in result.stderr
  assert not list(tmp_path.glob("*.npz"))


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
