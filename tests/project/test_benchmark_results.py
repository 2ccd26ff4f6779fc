"""A benchmark's results file names the benchmark, date, machine, command and commit above its figures."""

import datetime
import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks import benchmark_results
from tpu_graphs.data import locations


def test_results_file_holds_header_and_table_and_nothing_else_in_the_folder(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(sys, "argv", ["benchmarks/serve.py", "--configs=100", "--out", str(tmp_path / "serve.md")])
  path = benchmark_results.write("serve", "Serving", "| a | b |\n|---|---:|\n| x | 1 |\n", tmp_path / "serve.md")
  title, command, commit, blank, *table = path.read_text().splitlines()
  assert title.startswith(f"Serving (`benchmarks/serve.py`), {datetime.date.today()}, on ")
  assert f"{os.cpu_count()} cores" in title and "load average" in title
  assert command == f"Command: `python benchmarks/serve.py --configs=100 --out {os.path.relpath(tmp_path / 'serve.md', locations.REPOSITORY)}`"
  assert commit == f"Commit: {benchmark_results.commit()}"
  assert blank == "" and table == ["| a | b |", "|---|---:|", "| x | 1 |"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.md"]
  assert "| x | 1 |" in capsys.readouterr().out


def test_journal_gives_back_what_was_appended_and_nothing_before_the_first_entry(tmp_path):
  journal = tmp_path / "results" / "serve.jsonl"
  assert benchmark_results.read_journal(journal) == []
  first, second = {"file": "a.npz", "seed": 0, "tau": 0.5}, {"file": "b.npz", "seed": 1, "tau": -0.25}
  assert json.loads(benchmark_results.append_to_journal(journal, first)) == {**first, "commit": benchmark_results.commit()}
  benchmark_results.append_to_journal(journal, second)
  assert benchmark_results.read_journal(journal) == [first, second]
  assert journal.read_text().count("\n") == 2


def test_journal_resumes_nothing_another_commit_measured(tmp_path):
  journal = tmp_path / "real_layout.jsonl"
  journal.write_text(json.dumps({"file": "a.npz", "seed": 0, "tau": 0.5, "commit": "0" * 40}) + "\n" +
                     json.dumps({"file": "a.npz", "seed": 1, "tau": 0.25}) + "\n")
  assert benchmark_results.read_journal(journal) == []
  mine = {"file": "a.npz", "seed": 0, "tau": 0.75}
  benchmark_results.append_to_journal(journal, mine)
  assert benchmark_results.read_journal(journal) == [mine]


def test_command_quotes_arguments_so_it_can_be_pasted():
  assert benchmark_results.command("convert", ["--input_dir", "a b"]) == "python benchmarks/convert.py --input_dir 'a b'"


def test_command_names_paths_relative_to_the_repository_wherever_they_sit_in_an_argument():
  repository, sample = locations.REPOSITORY, locations.REPOSITORY.parent / "shared" / "tpugraphs_sample"
  argv = ["--files", f"{sample}/npz/a.npz,{repository}/data/generated/npz/b.npz", f"--out={repository}/out/x.md",
          "--train_flag=--records_dir=/tmp/records", "--data_root=gs://bucket/npz", "--seeds", "3"]
  line = benchmark_results.command("real_layout", argv)
  assert line == ("python benchmarks/real_layout.py --files ../shared/tpugraphs_sample/npz/a.npz,data/generated/npz/b.npz "
                  f"--out=out/x.md --train_flag=--records_dir={os.path.relpath('/tmp/records', repository)} "
                  "--data_root=gs://bucket/npz --seeds 3")
  assert not re.search(r"(^|[\s=,])/", line)


def test_default_path_is_in_benchmarks_results_for_research_benchmarks_too():
  assert benchmark_results.default_path("serve").parts[-3:] == ("benchmarks", "results", "serve.md")
  assert benchmark_results.default_path("research/sim_to_real") == benchmark_results.RESULTS_DIR / "sim_to_real.md"
  assert benchmark_results.command("research/sim_to_real", ["--seed", "1"]) == "python benchmarks/research/sim_to_real.py --seed 1"


def test_journals_and_plots_go_under_out_never_beside_the_committed_results():
  for out in [benchmark_results.default_path("real_layout"), "out/elsewhere/real_layout.md"]:
    assert benchmark_results.working_path(out, ".jsonl") == locations.REPOSITORY / "out" / "benchmarks" / "real_layout.jsonl"
  assert benchmark_results.working_path("x.md", ".png").parent.is_dir()


def _repository_copy(tmp_path):
  """A git repository with one commit and a results folder, standing in for the checkout."""
  root = tmp_path / "repository"
  (root / "benchmarks" / "results").mkdir(parents=True)
  (root / "code.py").write_text("x = 1\n")
  (root / "benchmarks" / "results" / "serve.md").write_text("old figures\n")
  for command in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
    subprocess.run(["git", "-C", str(root), *command], check=True)
  return root


def test_commit_is_head_and_says_when_the_code_differs_from_it(tmp_path, monkeypatch):
  root = _repository_copy(tmp_path)
  monkeypatch.setattr(locations, "REPOSITORY", root)
  monkeypatch.setattr(benchmark_results, "RESULTS_DIR", root / "benchmarks" / "results")
  head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
  assert re.fullmatch(r"[0-9a-f]{40}", head) and benchmark_results.commit() == head
  (root / "benchmarks" / "results" / "serve.md").write_text("new figures\n")  # a benchmark rewriting its result
  assert benchmark_results.commit() == head
  (root / "code.py").write_text("x = 2\n")
  assert benchmark_results.commit() == f"{head} with uncommitted changes"


def test_commit_outside_a_checkout_says_it_is_unknown(tmp_path, monkeypatch):
  monkeypatch.setattr(locations, "REPOSITORY", tmp_path)
  monkeypatch.setattr(benchmark_results, "RESULTS_DIR", tmp_path / "benchmarks" / "results")
  monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
  assert benchmark_results.commit() == "unknown (not a git checkout)"


def test_another_benchmarks_figures_are_read_from_its_table_rows_and_commit_line(tmp_path):
  path = tmp_path / "serve.md"
  path.write_text("Serving, 2026-12-01, on a machine, load average 1.3.\nCommand: `python benchmarks/serve.py`\n"
                  "Commit: abc (the commit that recorded this result)\n\n| measure | value |\n|---|---:|\n"
                  "| tile: warm configs/s | 21,267 |\n\nText between tables.\n\n| graph | configs/s |\n|---|---:|\n"
                  "| unet | 150 |\n")
  assert benchmark_results.table_rows(path) == [{"measure": "tile: warm configs/s", "value": "21,267"},
                                                {"graph": "unet", "configs/s": "150"}]
  assert benchmark_results.recorded_commit(path) == "abc (the commit that recorded this result)"
  path.write_text("| no | commit |\n")
  with pytest.raises(ValueError, match="no `Commit:` line"):
    benchmark_results.recorded_commit(path)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
