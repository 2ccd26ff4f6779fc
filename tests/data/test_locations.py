"""The real sample is found where TPUGRAPHS_SAMPLE_DIR says, else beside the repository, and its
absence is reported with where it was looked for."""

import sys

import pytest

from tpu_graphs.data import errors, locations


def test_sample_dir_follows_the_environment_variable(tmp_path, monkeypatch):
  monkeypatch.setenv(locations.SAMPLE_DIR_VARIABLE, str(tmp_path))
  assert locations.sample_dir() == tmp_path


def test_sample_dir_defaults_to_shared_beside_the_repository(monkeypatch):
  monkeypatch.delenv(locations.SAMPLE_DIR_VARIABLE, raising=False)
  assert locations.sample_dir() == locations.REPOSITORY.parent / "shared" / "tpugraphs_sample"


def test_sample_path_returns_an_existing_path(tmp_path, monkeypatch):
  (tmp_path / "npz").mkdir()
  monkeypatch.setenv(locations.SAMPLE_DIR_VARIABLE, str(tmp_path))
  assert locations.sample_path("npz") == tmp_path / "npz"


def test_a_missing_sample_names_the_path_and_how_to_point_at_the_sample(tmp_path, monkeypatch):
  monkeypatch.setenv(locations.SAMPLE_DIR_VARIABLE, str(tmp_path / "elsewhere"))
  with pytest.raises(errors.InputError) as raised:
    locations.sample_path("npz/tile")
  assert str(raised.value).startswith(f"{tmp_path / 'elsewhere' / 'npz' / 'tile'}: the real TpuGraphs sample")
  assert locations.SAMPLE_DIR_VARIABLE in str(raised.value)


def test_a_program_run_with_a_tree_imports_tpu_graphs_from_it_and_returns_its_output(tmp_path):
  tree, program = tmp_path / "tree", tmp_path / "elsewhere" / "where.py"
  (tree / "tpu_graphs").mkdir(parents=True)
  (tree / "tpu_graphs" / "__init__.py").write_text("WHERE = 'the other tree'\n")
  program.parent.mkdir()
  program.write_text("import tpu_graphs\nprint(tpu_graphs.WHERE)\n")
  assert locations.run_with_tree([sys.executable, str(program)], tree) == "the other tree\n"


def test_a_failing_program_is_reported_with_its_command_and_stderr(tmp_path):
  command = [sys.executable, "-c", "import sys; sys.exit('bad input')"]
  with pytest.raises(RuntimeError, match=r"(?s)-c import sys.* failed:\nbad input"):
    locations.run_with_tree(command, tmp_path)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
