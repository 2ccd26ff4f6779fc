"""A benchmark's results file names the benchmark, date, machine and command above its figures."""

import datetime
import os
import sys

import pytest

from tpu_graphs import benchmark_results


def test_results_file_holds_header_and_table_and_nothing_else_in_the_folder(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(sys, "argv", ["benchmarks/serve.py", "--configs=100", "--out", str(tmp_path / "serve.md")])
  path = benchmark_results.write("serve", "Serving", "| a | b |\n|---|---:|\n| x | 1 |\n", tmp_path / "serve.md")
  title, command, blank, *table = path.read_text().splitlines()
  assert title.startswith(f"Serving (`benchmarks/serve.py`), {datetime.date.today()}, on ")
  assert f"{os.cpu_count()} cores" in title and "load average" in title
  assert command == f"Command: `python benchmarks/serve.py --configs=100 --out {tmp_path / 'serve.md'}`"
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


def test_default_path_is_in_benchmarks_results():
  assert benchmark_results.default_path("serve").parts[-3:] == ("benchmarks", "results", "serve.md")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
