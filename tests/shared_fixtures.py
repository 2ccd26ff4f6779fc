"""What several tests need trained, exported or compiled, built once by Bazel and cached.

Each fixture is a genrule of tests/BUILD that runs this module and packs what it made into
bazel-bin/tests/<fixture>.tar. A test that takes the target as data unpacks its own copy (`unpack`),
which it may change; run directly with pytest, it finds the tars in bazel-bin/tests/ after
`bazel build //tests:all`. A test that checks training itself trains its own runs.

  tile_run        a tile tree whose runtimes tie (npz/), its records (records/) and a finished
                  tiles_train.py run on them (run/, TILE_RUN_FLAGS: 2 epochs, export/ included)
  layout_export   an untrained layout model that prunes graphs to their configurable ops' 1-hop
                  neighbourhoods, exported with the static signatures (export/): ranking needs
                  scores, not good ones
  tile_library    tile_run's export with its native library compiled for CPU level x86-64 alone
                  (export/, export/native/)
  layout_library  layout_export with its native library compiled for every CPU level (export/,
                  export/native/)

  python tests/shared_fixtures.py <fixture> <output.tar> [<tar of the fixture it builds on>] [<runtime dir>]
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

from tpu_graphs.data import convert, npz

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
# tile_run's settings: a model and a run as small as still train (2 epochs, so that a run killed
# in its second epoch can resume from the first one's checkpoint; tests/programs/test_faults.py).
TILE_RUN_FLAGS = ["--epochs=2", "--batch_size=4", "--configs_per_graph=8", "--units=16", "--layers=1",
                  "--learning_rate=3e-3", "--patience=3"]
TILE_RUN_GRAPHS = {"train": 24, "valid": 4, "test": 2}


def unpack(fixture: str, into: pathlib.Path) -> pathlib.Path:
  """A fresh copy of the fixture's files in `into` (made if need be), which it returns."""
  import bazel_outputs  # pylint: disable=g-import-not-at-top: pytest's only; the genrules do not import it
  into.mkdir(parents=True, exist_ok=True)
  with tarfile.open(bazel_outputs.built(f"tests/{fixture}.tar")) as archive:
    archive.extractall(into, filter="tar")
  return into


def write_tied_tile_tree(root: pathlib.Path, graphs_per_split: dict) -> pathlib.Path:
  """<root>/npz/tile/xla/<split>/*.npz whose measured runtimes take 4 values per kernel, so that
  sampled configs tie, as measured runtimes often do (ties are where ListMLE draws at random)."""
  import tile_test_data  # pylint: disable=g-import-not-at-top: beside this file, in the genrule too
  rng = np.random.default_rng(0)
  for split, count in graphs_per_split.items():
    for index in range(count):
      graph = tile_test_data.tile_graph(rng, f"{split}_kernel_{index:03d}", split, 24)
      if split != "test":
        levels = np.quantile(graph.config_runtime, [0.25, 0.5, 0.75])
        graph = dataclasses.replace(graph, config_runtime=(np.searchsorted(levels, graph.config_runtime) + 1) * 1000)
      npz.write_graph(root / "npz/tile/xla" / split / f"{graph.graph_id}.npz", graph)
  return root / "npz"


def program_environment() -> dict:
  """The environment of a program of baselines/ run by a test: this checkout's tpu_graphs, whatever
  is installed, and TensorFlow's C++ logs quiet."""
  paths = [str(REPOSITORY)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
  return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TF_CPP_MIN_LOG_LEVEL": "2"}


def tile_run_flags(root: pathlib.Path, run: pathlib.Path) -> list[str]:
  """tiles_train.py's flags for a run of TILE_RUN_FLAGS on the tree and records of an unpacked tile_run."""
  return [f"--data_root={root / 'npz'}", f"--records_dir={root / 'records'}", f"--out_dir={run}", *TILE_RUN_FLAGS]


def _build_tile_run(root: pathlib.Path) -> None:
  write_tied_tile_tree(root, TILE_RUN_GRAPHS)
  convert.convert_directory(root / "npz", root / "records", progress=False)
  quiet = {**program_environment(), "TF_CPP_MIN_LOG_LEVEL": "3"}  # a build's log shows only what fails
  subprocess.run([sys.executable, str(REPOSITORY / "baselines/tiles_train.py"), *tile_run_flags(root, root / "run")],
                 env=quiet, check=True, stdout=subprocess.DEVNULL)


def _build_layout_export(root: pathlib.Path) -> None:
  from benchmarks import untrained  # pylint: disable=g-import-not-at-top: TensorFlow only where needed
  exported = untrained.export_untrained("layout:xla:default", root, units=16, layers=2, prune_hops=1,
                                        static_signatures=True)
  exported.rename(root / "export")


def _compile_library(root: pathlib.Path, export_dir: pathlib.Path, runtime_dir: pathlib.Path,
                     cpus: tuple[str, ...] | None) -> None:
  """Compiles the model library into export_dir for `cpus` (None: every level)."""
  from tpu_graphs.export.aot import native_library  # pylint: disable=g-import-not-at-top
  native_library.compile_model_library(export_dir, runtime_dir, cpus=cpus or tuple(native_library.CPUS))
  if export_dir != root / "export":
    export_dir.rename(root / "export")


def build(fixture: str, root: pathlib.Path, source: pathlib.Path | None = None,
          runtime_dir: pathlib.Path | None = None) -> list[str]:
  """Makes `fixture` in the empty folder `root` (from the unpacked tar `source` of the fixture it
  builds on); returns the entries of `root` it consists of."""
  if fixture == "tile_run":
    _build_tile_run(root)
    return ["npz", "records", "run"]
  if fixture == "layout_export":
    _build_layout_export(root)
    return ["export"]
  if fixture in ("tile_library", "layout_library"):
    with tarfile.open(source) as archive:
      archive.extractall(root, filter="tar")
    # The layout model for every CPU level, whose dispatch (the model libraries' one, library_checks.h)
    # test_native checks level by level; the tile model for the oldest alone, a third of the
    # compilation, which is all its tests run.
    tile = fixture == "tile_library"
    _compile_library(root, root / ("run/export" if tile else "export"), runtime_dir, ("x86-64",) if tile else None)
    return ["export"]
  raise ValueError(f"unknown fixture {fixture!r}")


def main(argv: list[str]) -> None:
  fixture, output, *rest = argv[1:]
  source = pathlib.Path(rest[0]) if rest else None
  runtime_dir = pathlib.Path(rest[1]) if len(rest) > 1 else None
  with tempfile.TemporaryDirectory() as scratch:
    entries = build(fixture, pathlib.Path(scratch), source, runtime_dir)
    with tarfile.open(output, "w") as archive:
      for entry in entries:
        archive.add(pathlib.Path(scratch) / entry, arcname=entry)


if __name__ == "__main__":
  main(sys.argv)
