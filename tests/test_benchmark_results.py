"""A benchmark's results file names the benchmark, date, machine and command above its figures."""

import datetime
import os
import re
import sys

import pytest

from benchmarks import benchmark_results
from tpu_graphs.data import locations


def test_results_file_holds_header_and_table_and_nothing_else_in_the_folder(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(sys, "argv", ["benchmarks/serve.py", "--configs=100", "--out", str(tmp_path / "serve.md")])
  path = benchmark_results.write("serve", "Serving", "| a | b |\n|---|---:|\n| x | 1 |\n", tmp_path / "serve.md")
  title, command, blank, *table = path.read_text().splitlines()
  assert title.startswith(f"Serving (`benchmarks/serve.py`), {datetime.date.today()}, on ")
  assert f"{os.cpu_count()} cores" in title and "load average" in title
  assert command == f"Command: `python benchmarks/serve.py --configs=100 --out {os.path.relpath(tmp_path / 'serve.md', locations.REPOSITORY)}`"
  assert blank == "" and table == ["| a | b |", "|---|---:|", "| x | 1 |"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.md"]
  assert "| x | 1 |" in capsys.readouterr().out


def test_journal_gives_back_what_was_appended_and_nothing_before_the_first_entry(tmp_path):
  journal = tmp_path / "results" / "serve.jsonl"
  assert benchmark_results.read_journal(journal) == []
  first, second = {"file": "a.npz", "seed": 0, "tau": 0.5}, {"file": "b.npz", "seed": 1, "tau": -0.25}
  assert benchmark_results.append_to_journal(journal, first) == '{"file": "a.npz", "seed": 0, "tau": 0.5}'
  benchmark_results.append_to_journal(journal, second)
  assert benchmark_results.read_journal(journal) == [first, second]
  assert journal.read_text().count("\n") == 2


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


def test_default_path_is_in_benchmarks_results():
  assert benchmark_results.default_path("serve").parts[-3:] == ("benchmarks", "results", "serve.md")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
