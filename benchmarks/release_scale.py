"""Disk, memory and hours per stage of the real-release path, measured on release-shaped generated
data and extrapolated to the full TpuGraphs release.

  python benchmarks/release_scale.py [--file_scale 50] [--config_scale 20] [--steps_per_epoch 10] \
      [--work_dir /tmp/release_scale] [--out benchmarks/results/release_scale.md]

Nobody should have to download tens of GB to learn whether their machine can train on the release.
This benchmark writes, with the project's generator (tpu_graphs/synth/generate.py: real XLA graphs
of the model zoo, cost-model labels), a tree shaped like the release and scaled down: per
collection and split the release's file count divided by --file_scale, layout files with the
config counts of the real sample's files of their collection divided by --config_scale (test
files: the release's 1,000 configs, scaled alike), tile kernels with the sample's tile config
counts. Then it runs the release path's programs on it, each in its own process, as a user would:
convert.py (the whole tree), tiles_train.py and layout_train.py with the recipe for --data_root (one
epoch each; layout epochs cut to --steps_per_epoch steps), evaluate.py on each run's valid split,
and combine_csvs.py. Per stage it measures wall and CPU seconds, the peak RSS of the stage's
process and the bytes the stage left on disk.

Extrapolation to the release (the table's "release" columns) uses one stated work unit per
collection: the sum over its files of configs x graph size, where graph size is the configurable
nodes for layout (what the layout recipe's model reads: --prune_hops 0 keeps only those, and
node_config_feat is configs x configurable nodes) and all nodes for tile kernels. The release's
work is its file counts (RELEASE_FILES) times the mean work of the real sample's files of the
collection (../shared/tpugraphs_sample). Each process's start (the quickest stage's CPU time)
stays as measured; conversion and disk grow linearly with that work; scoring (validation passes,
evaluate.py, test predictions) is counted at the scoring rates this project measured on real
graphs, read at run time from the result files of the benchmarks that measured them
(scoring_rates()), since on the scaled tree it is lost in each process's fixed costs; a training
run's steps grow with the recipe's epochs and steps and the graphs' sizes (for tile with the
training file count too): see extrapolate(). Figures are CPU seconds, which the
load of a shared machine changes far less than wall seconds. Peak memory is quoted as measured:
it follows the largest graph times the configs scored per chunk, not the dataset's size.
Stages are journaled (out/benchmarks/<out's name>.jsonl): a rerun after a kill measures only the
missing ones, and one after a finished run only rewrites the report (delete the journal to measure
anew; a journal whose --work_dir tree is gone is started anew).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import errors, graphs, locations, npz, statistics
from tpu_graphs.synth import generate, zoo
from tpu_graphs.train import experiments

_WORK_DIR = flags.DEFINE_string("work_dir", "/tmp/release_scale", "Scratch folder for the data and the runs "
                                "(emptied when measuring anew).")
_FILE_SCALE = flags.DEFINE_integer("file_scale", 50, "The release's file count per collection and split is "
                                   "divided by this (at least one file each).")
_CONFIG_SCALE = flags.DEFINE_integer("config_scale", 20, "Layout config counts are divided by this.")
_STEPS = flags.DEFINE_integer("steps_per_epoch", 10, "Layout training steps measured (the recipe's epoch: "
                              f"{experiments.LAYOUT_TRAINING['steps_per_epoch']}).")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("release_scale")), "Where the Markdown goes.")
program.require_at_least(1, _FILE_SCALE)
program.require_at_least(1, _CONFIG_SCALE)
program.require_at_least(1, _STEPS)

# Files per collection and split in the release (v0 tars; the Kaggle "predict-ai-model-runtime" npz
# tree holds the same files): tile:xla 7,229 kernels, layout 705 files of 352 programs.
RELEASE_FILES = {
    "tile:xla": {"train": 5709, "valid": 676, "test": 844},
    "layout:xla:default": {"train": 61, "valid": 7, "test": 8},
    "layout:xla:random": {"train": 69, "valid": 7, "test": 8},
    "layout:nlp:default": {"train": 198, "valid": 20, "test": 50},
    "layout:nlp:random": {"train": 207, "valid": 20, "test": 50},
}
# The real sample's labelled layout files are of layout:xla:default only; the same search's configs
# stand in for layout:nlp's labelled files. For random search, the config count MANIFEST.tsv records
# for a derived alexnet file of the release (constant feature columns dropped, configs intact; the
# file itself is not in the sample), with the test file's graph size.
LABELLED_STAND_IN = {"layout:nlp:default": "layout:xla:default", "layout:nlp:random": "layout:xla:random"}
DERIVED_RANDOM_FILE = "derived/trialan/cleaned_alexnet.npz"
# Zoo programs the scaled tree is made of, per source (cheap to compile; node counts near the sample's).
PROGRAMS = {"xla": ("mobilenet_v3_small", "mobilenet", "resnet50"), "nlp": ("transformer_encoder", "gru")}
# The end of Keras's progress bar for a finished epoch: "14/14 [=====] - 25s 284ms/step - loss: ...":
# steps, the epoch's seconds (the first step's tracing included) and the time per later step.
_KERAS_EPOCH = re.compile(r"(\d+)/\1 \[=+\] - \d+s (\d+)(s|ms|us)/step")
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
# The result files holding the scoring rates measured on real release graphs with models of the
# recipe's size: configs/s per real layout graph (benchmarks/train_layout.py --parts=score) and warm
# tile configs/s through the SavedModel (benchmarks/serve.py).
LAYOUT_SCORING_RESULT = benchmark_results.RESULTS_DIR / "train_layout_score.md"
TILE_SCORING_RESULT = benchmark_results.RESULTS_DIR / "serve.md"
TILE_SCORING_MEASURE = "tile: warm configs/s"
STAGE_COLUMNS = ("stage", "wall s", "CPU s", "peak RSS GB", "disk MB", "release: CPU-hours", "release: disk GB")


@dataclasses.dataclass
class FileSize:
  """One graph file's size as the work unit counts it."""
  graph_size: int  # configurable nodes (layout) or nodes (tile)
  configs: int

  @property
  def work(self) -> int:
    return self.graph_size * self.configs


@dataclasses.dataclass(frozen=True)
class ScoringRates:
  """Scoring speeds read from other benchmarks' result files (wall seconds on their machine).

  layout: (configurable nodes, configs/s) per real layout graph, fewest nodes first; a graph's
    seconds per config are taken as linear in its configurable nodes through the first and last.
  tile: warm tile configs/s.
  peak: the largest peak RSS the layout scoring measured, with its graph, as that file words it.
  sources: each file read, with the commit it names.
  """
  layout: tuple[tuple[int, float], ...]
  tile: float
  peak: str
  sources: tuple[str, ...]

  def layout_seconds_per_config(self, configurable_nodes: float) -> float:
    (small, small_rate), (large, large_rate) = self.layout[0], self.layout[-1]
    return 1 / small_rate + (configurable_nodes - small) * (1 / large_rate - 1 / small_rate) / (large - small)


def _number(cell: str) -> float:
  return float(cell.replace(",", "").split()[0])


def scoring_rates(layout_result=LAYOUT_SCORING_RESULT, tile_result=TILE_SCORING_RESULT) -> ScoringRates:
  """The scoring rates as the two result files record them; a layout graph's configurable nodes
  are read from its file in the real sample. InputError naming the file where a figure is missing."""
  layout_rows = [row for row in benchmark_results.table_rows(layout_result) if "graph" in row and "configs/s" in row]
  layout = []
  for row in layout_rows:
    found = sorted(locations.sample_path("npz").rglob(f"{row['graph']}.npz"))
    if not found:
      raise errors.InputError(f"{layout_result}: graph {row['graph']} is not in the real sample "
                              f"({locations.sample_dir()})")
    layout.append((int(npz.read_graph(found[0], stream_configs=True).node_config_ids.size),
                   _number(row["configs/s"])))
  if len({nodes for nodes, _ in layout}) < 2:
    raise errors.InputError(f"{layout_result}: no two layout graphs of different sizes with their configs/s")
  tile = [row["value"] for row in benchmark_results.table_rows(tile_result) if row.get("measure") == TILE_SCORING_MEASURE]
  if not tile:
    raise errors.InputError(f"{tile_result}: no row '{TILE_SCORING_MEASURE}'")
  largest = max(layout_rows, key=lambda row: _number(row["peak RSS"]))
  return ScoringRates(
      tuple(sorted(layout)), _number(tile[0]), f"{largest['peak RSS']} on the {largest['ops']}-op graph {largest['graph']}",
      tuple(f"`{path.name}` at {benchmark_results.recorded_commit(path).split(' (')[0]}"
            for path in map(pathlib.Path, (layout_result, tile_result))))


def file_size(path) -> FileSize:
  graph = npz.read_graph(path, stream_configs=True)
  if graphs.collection_kind(graph.collection) == "layout":
    return FileSize(int(graph.node_config_ids.size), int(graph.num_configs))
  return FileSize(int(graph.node_feat.shape[0]), int(graph.num_configs))


def manifest_configs(staged_path: str):
  """The config count MANIFEST.tsv records for a sample file, or None where it lists none."""
  manifest = locations.sample_path("MANIFEST.tsv")
  header, *rows = [line.split("\t") for line in manifest.read_text().splitlines()]
  for row in rows:
    entry = dict(zip(header, row))
    if entry["staged_path"] == staged_path and entry["c_configs"].isdigit():
      return int(entry["c_configs"])
  return None


def sample_sizes() -> dict[str, dict[str, list[FileSize]]]:
  """{collection: {"labelled" | "test": [FileSize]}} of the real sample's npz files."""
  root = locations.sample_path("npz")
  sizes: dict = {c: {"labelled": [], "test": []} for c in graphs.COLLECTIONS}
  for path in sorted(root.rglob("*.npz")):
    graph = npz.read_graph(path, stream_configs=True)
    sizes[graph.collection]["test" if graph.split == "test" else "labelled"].append(file_size(path))
  random_configs = manifest_configs(DERIVED_RANDOM_FILE)
  if random_configs and not sizes["layout:xla:random"]["labelled"]:
    sizes["layout:xla:random"]["labelled"] = [FileSize(s.graph_size, random_configs)
                                              for s in sizes["layout:xla:random"]["test"]]
  for collection, stand_in in LABELLED_STAND_IN.items():
    if not sizes[collection]["labelled"]:
      nodes = np.mean([s.graph_size for s in sizes[collection]["test"]])
      sizes[collection]["labelled"] = [FileSize(int(nodes), s.configs) for s in sizes[stand_in]["labelled"]]
  # A kernel's config count does not depend on its split: every sample kernel stands for each split.
  sizes["tile:xla"]["labelled"] = sizes["tile:xla"]["test"] = sizes["tile:xla"]["labelled"] + sizes["tile:xla"]["test"]
  return sizes


def release_work(sizes) -> dict[str, dict[str, float]]:
  """{collection: {split: work}} of the full release: file count x the sample's mean work."""
  return {c: {split: count * np.mean([s.work for s in sizes[c]["test" if split == "test" else "labelled"]])
              for split, count in counts.items()} for c, counts in RELEASE_FILES.items()}


def scaled_count(count: int) -> int:
  return max(1, round(count / _FILE_SCALE.value))


def generate_tree(root: pathlib.Path, sizes, seed: int = 0) -> None:
  """Writes the scaled, release-shaped tree: per collection and split scaled_count files, each from
  a zoo program in rotation, its config count taken in rotation from the sample's files."""
  compiled = {}
  for source, names in PROGRAMS.items():
    for name in names:
      program = zoo.Program(zoo.ARCHITECTURES_BY_NAME[name], 1, "f32")
      print(f"compiling {program.name} ...", flush=True)
      compiled[name] = zoo.compile_program(program, traced_inference=True)
  for collection, counts in RELEASE_FILES.items():
    kind, source = graphs.collection_kind(collection), collection.split(":")[1]
    for split, count in counts.items():
      pool = sizes[collection]["test" if split == "test" else "labelled"]
      for index in range(scaled_count(count)):
        name = PROGRAMS[source][index % len(PROGRAMS[source])]
        graph_id = f"{name}.{split}{index:03d}"
        configs = pool[index % len(pool)].configs
        if kind == "layout":
          nodes, model = generate.layout_model(compiled[name].module, graph_id, seed)
          generate.write_layout_file(root, collection, split, graph_id, nodes, model,
                                     max(2, round(configs / _CONFIG_SCALE.value)), seed)
        else:
          kernels = generate.distinct_kernels(compiled[name].optimized)
          for offset in range(len(kernels)):  # the next kernel with at least two tile sizes
            kernel = kernels[(index + offset) % len(kernels)]
            if generate.write_tile_file(root, split, graph_id, kernel, max(2, configs), seed) is not None:
              break
      print(f"  {collection} {split}: {scaled_count(count)} file(s)", flush=True)


def tree_work(npz_root: pathlib.Path) -> dict[str, dict[str, float]]:
  work: dict = {c: {s: 0.0 for s in graphs.SPLITS} for c in graphs.COLLECTIONS}
  for path in sorted(npz_root.rglob("*.npz")):
    graph = npz.read_graph(path, stream_configs=True)
    work[graph.collection][graph.split] += file_size(path).work
  return work


def mean_graph_size(npz_dir: pathlib.Path) -> float:
  return float(np.mean([file_size(path).graph_size for path in sorted(npz_dir.glob("*.npz"))]))


def directory_bytes(path: pathlib.Path) -> int:
  return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


# Runs the command given as its arguments and prints the peak RSS of that process. A child's peak RSS
# (ru_maxrss) starts at its parent's RSS when forked (Linux keeps the forked copy's high-water mark
# across exec), and this benchmark's process holds TensorFlow and the compiled zoo: a small Python
# in between is the parent whose RSS does not hide the stage's.
_PEAK_RSS_REPORTER = """import resource, subprocess, sys
status = subprocess.call(sys.argv[1:])
print(f"peak_rss_kb {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", flush=True)
sys.exit(status)"""


def run_stage(name: str, command: list[str], written: pathlib.Path, log: pathlib.Path) -> dict:
  """Runs one stage's program; its wall and CPU seconds (user + system, of it and the processes it
  waited for), its peak RSS (GB) and the bytes it left under `written`."""
  print(f"[{name}] {' '.join(command[1:])}", flush=True)
  before = directory_bytes(written)
  started = time.perf_counter()
  process = subprocess.Popen([sys.executable, "-c", _PEAK_RSS_REPORTER, *command], cwd=locations.REPOSITORY,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PYTHONPATH": str(locations.REPOSITORY)})
  output = process.stdout.read()
  log.parent.mkdir(parents=True, exist_ok=True)
  log.write_text(output)
  _, status, usage = os.wait4(process.pid, 0)
  seconds = time.perf_counter() - started
  process.returncode = os.waitstatus_to_exitcode(status)
  if process.returncode:
    raise RuntimeError(f"{name}: {' '.join(command)} failed ({process.returncode}):\n{output[-4000:]}")
  epoch = _KERAS_EPOCH.findall(output)
  peak_kb = int(re.findall(r"^peak_rss_kb (\d+)$", output, re.MULTILINE)[-1])
  result = {"stage": name, "seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "steps_seconds": int(epoch[-1][0]) * int(epoch[-1][1]) * _SECONDS[epoch[-1][2]] if epoch else None,
            "peak_gb": peak_kb / 2**20, "bytes": directory_bytes(written) - before,
            "load": os.getloadavg()[1]}
  print(f"  {seconds:.0f} s ({result['cpu_seconds']:.0f} CPU s), peak RSS {result['peak_gb']:.2f} GB, "
        f"{result['bytes'] / 1e6:.1f} MB written", flush=True)
  return result


def program(name: str) -> list[str]:
  return [sys.executable, str(locations.REPOSITORY / "baselines" / name)]


def run_directory(work: pathlib.Path, collection: str) -> pathlib.Path:
  return work / "runs" / collection.replace(":", "_")


def stage_commands(work: pathlib.Path, npz_root: pathlib.Path) -> list[tuple[str, list[str], pathlib.Path]]:
  """(stage, command, the folder it writes) of every stage of the release path, in order."""
  stages = [("convert", program("convert.py") + [f"--input_dir={npz_root}", f"--output_dir={work / 'records'}"],
             work / "records")]
  for collection in graphs.COLLECTIONS:
    run_dir = run_directory(work, collection)
    if collection == "tile:xla":
      command = program("tiles_train.py") + ["--epochs=1"]
    else:
      _, source, search = collection.split(":")
      command = program("layout_train.py") + [f"--source={source}", f"--search={search}", "--epochs=1",
                                              f"--steps_per_epoch={_STEPS.value}"]
    stages.append((f"train {collection}", command + [f"--data_root={npz_root}", f"--out_dir={run_dir}"], run_dir))
  for collection in graphs.COLLECTIONS:
    eval_dir = work / "eval" / collection.replace(":", "_")
    stages.append((f"evaluate {collection}", program("evaluate.py") + [
        f"--run_dir={run_directory(work, collection)}", "--split=valid", f"--out_dir={eval_dir}"], eval_dir))
  stages.append(("combine_csvs", program("combine_csvs.py") + [
      f"--runs_dir={work / 'runs'}", f"--data_root={npz_root}", f"--output={work / 'submission' / 'submission.csv'}"],
                 work / "submission"))
  return stages


def release_configs(sizes, collection: str, split: str) -> float:
  pool = sizes[collection]["test" if split == "test" else "labelled"]
  return RELEASE_FILES[collection][split] * float(np.mean([s.configs for s in pool]))


def release_scoring_cpu_seconds(sizes, rates: ScoringRates, collection: str, split: str) -> float:
  """CPU seconds to score every config of the release's split once, at the measured scoring rates
  (wall seconds on an idle 2-core machine, counted as both cores busy)."""
  if collection == "tile:xla":
    seconds_per_config = 1 / rates.tile
  else:
    size = np.mean([s.graph_size for s in sizes[collection]["test" if split == "test" else "labelled"]])
    seconds_per_config = rates.layout_seconds_per_config(size)
  return 2 * release_configs(sizes, collection, split) * seconds_per_config


def extrapolate(results: list[dict], scaled: dict, release: dict, work: pathlib.Path, sizes,
                rates: ScoringRates) -> None:
  """Adds to each stage's result its release estimates: release_cpu_hours and release_gb.

  Every process pays a start (Python, TensorFlow, reading its inputs' headers) that does not grow
  with the data: the quickest stage's CPU time. Conversion and disk grow linearly with the work
  (configs x graph size). Scoring (evaluate.py, a training run's validation passes and test
  predictions) is counted at the measured scoring rates on real graphs, for the release's config
  counts: on the scaled tree it is lost in each process's fixed costs. A training run's steps grow
  with the recipe's epochs, steps and the graphs' sizes: Keras's progress bar gives the steps and
  the time per step after the first (its tracing is a fixed cost; the epoch's validation pass is
  spread over the steps, so this errs high). Its own conversion grows as convert.py's does; what
  remains of the measured run (starting, tracing, saving and exporting) stays as measured.
  """
  start = min(r["cpu_seconds"] for r in results)
  total = sum(sum(s.values()) for s in release.values()) / sum(sum(s.values()) for s in scaled.values())
  convert_cpu = next(r["cpu_seconds"] for r in results if r["stage"] == "convert")
  convert_cpu_per_work = (convert_cpu - start) / sum(sum(s.values()) for s in scaled.values())
  for result in results:
    stage, collection = result["stage"].split(" ")[0], result["stage"].split(" ")[-1]
    cpu = result["cpu_seconds"]
    if stage == "convert":
      disk_factor = total
      estimate = start + (cpu - start) * total
    elif stage == "evaluate":
      disk_factor = release[collection]["valid"] / scaled[collection]["valid"]
      estimate = cpu + release_scoring_cpu_seconds(sizes, rates, collection, "valid")
    elif stage == "train":
      steps = result["steps_seconds"] * cpu / result["seconds"]  # the run's CPU share
      fixed = max(0.0, cpu - steps)
      release_size = np.mean([s.graph_size for s in sizes[collection]["labelled"]])
      train_dir = graphs.collection_directory(work / "data" / "npz", collection) / "train"
      size_factor = release_size / mean_graph_size(train_dir)
      if collection == "tile:xla":
        recipe = experiments.TILE_TRAINING
        train_files = RELEASE_FILES[collection]["train"]
        step_factor = size_factor * train_files / scaled_count(train_files)
      else:
        recipe = experiments.LAYOUT_TRAINING
        step_factor = size_factor * recipe["steps_per_epoch"] / _STEPS.value
      conversion = (convert_cpu_per_work * (sum(release[collection].values()) - sum(scaled[collection].values())))
      estimate = (fixed + conversion + recipe["epochs"] * steps * step_factor
                  + (recipe["epochs"] + 1) * release_scoring_cpu_seconds(sizes, rates, collection, "valid")
                  + release_scoring_cpu_seconds(sizes, rates, collection, "test"))
      # Its records grow with the work; its model, checkpoints and export do not.
      run_dir = run_directory(work, collection)
      records = directory_bytes(run_dir / "records") + directory_bytes(run_dir / "dedup")
      grown = sum(release[collection].values()) / sum(scaled[collection].values())
      disk_factor = (result["bytes"] - records + records * grown) / result["bytes"]
    else:  # combine_csvs: reads a few CSVs, one row per test graph
      disk_factor, estimate = 1.0, cpu
    result["release_cpu_hours"] = estimate / 3600
    result["release_gb"] = result["bytes"] * disk_factor / 1e9


def report(results, scaled, release, npz_root: pathlib.Path, sizes, rates: ScoringRates,
           generation_seconds: float) -> str:
  tree = statistics.format_table(statistics.directory_statistics(npz_root))
  rows = [[r["stage"], f"{r['seconds']:.0f}", f"{r['cpu_seconds']:.0f}", f"{r['peak_gb']:.2f}",
           f"{r['bytes'] / 1e6:.1f}", f"{r['release_cpu_hours']:.1f}", f"{r['release_gb']:.1f}"] for r in results]
  cpu_hours = sum(r["release_cpu_hours"] for r in results)
  disk = sum(r["release_gb"] for r in results)
  peak = max(r["peak_gb"] for r in results)
  rows.append(["**all stages**", f"{sum(r['seconds'] for r in results):.0f}",
               f"{sum(r['cpu_seconds'] for r in results):.0f}", f"{peak:.2f}",
               f"{sum(r['bytes'] for r in results) / 1e6:.1f}", f"{cpu_hours:.0f}", f"{disk:.0f}"])
  training = sum(r["release_cpu_hours"] for r in results if r["stage"].startswith("train"))
  work_rows = [[c, f"{sum(scaled[c].values()):.3g}", f"{sum(release[c].values()):.3g}",
                f"{sum(release[c].values()) / sum(scaled[c].values()):.0f}",
                " / ".join(f"{release_configs(sizes, c, split):,.0f}" for split in graphs.SPLITS)]
               for c in graphs.COLLECTIONS]
  sample_rows = [[c, ", ".join(f"{s.graph_size}×{s.configs}" for s in sizes[c]["labelled"]),
                  ", ".join(f"{s.graph_size}×{s.configs}" for s in sizes[c]["test"])] for c in graphs.COLLECTIONS]
  lines = [
      f"The real-release path on a release-shaped generated tree: the release's file counts divided by "
      f"{_FILE_SCALE.value}, layout config counts by {_CONFIG_SCALE.value} (generated in {generation_seconds:.0f} s). "
      f"Each stage is one program in its own process: measured wall seconds, CPU seconds (user + system), peak "
      f"RSS of that process and bytes it left on disk, at a 5-minute load average of "
      f"{np.mean([r['load'] for r in results]):.1f} on {os.cpu_count()} cores (the mean at the stages' ends: other "
      f"jobs shared the cores, so wall seconds are long and CPU seconds are the figure to scale). Each training "
      f"run converts its own records (deduplicating layout configs), trains one epoch (layout: "
      f"{_STEPS.value} steps), validates, predicts the test split and exports.", "",
      f"The two release columns are **extrapolated**, not measured (`extrapolate()` in the benchmark): each "
      f"process's start (the quickest stage's CPU time) as measured; conversion and disk linear in Σ configs × "
      f"graph size (configurable nodes for layout, nodes for tile; of a training run's disk only its records and "
      f"deduplicated configs grow); scoring (validation, evaluation, test "
      f"predictions) at the scoring rates measured on real graphs, read from their result files ("
      f"{' and '.join(rates.sources)}): "
      + ", ".join(f"{rate:g} configs/s on a layout graph of {nodes} configurable nodes" for nodes, rate in rates.layout)
      + f", seconds per config linear in between; {rates.tile:,.0f} tile configs/s; wall seconds on the cores of "
      f"their machine, counted as CPU seconds of two) for the release's config counts; "
      f"a training run's steps as the recipe's epochs ({experiments.TILE_TRAINING['epochs']} tile, "
      f"{experiments.LAYOUT_TRAINING['epochs']} layout) × the measured steps' CPU time (Keras's steps × time per "
      f"step after the first, the run's CPU share of it), grown with graph size (tile: and with the training "
      f"file count; layout: {_STEPS.value} → "
      f"{experiments.LAYOUT_TRAINING['steps_per_epoch']} steps), plus a validation pass per epoch, one more at the "
      f"end and a test pass, plus its conversion grown as convert's; the rest of the run (start, tracing, "
      f"saving, exporting) as measured.", "",
      statistics.markdown_table(STAGE_COLUMNS, rows), "",
      f"The release, one stage after another: about **{cpu_hours:.0f} CPU-hours**, of which training "
      f"{training:.0f}, and **{disk:.0f} GB** written beside the downloaded npz files. A machine with k free cores "
      f"needs at least CPU-hours / k hours: on 2 cores between {cpu_hours / 2:.0f} and {cpu_hours:.0f} hours. "
      f"TensorFlow spreads a training step's ops over the cores, and the five training runs are independent, so "
      f"quickstart.py runs them side by side (--parallel, one per core): more cores divide the hours, up to the "
      f"longest single run. The largest process peaked at {peak:.2f} GB here; peak memory grows with the "
      f"largest graph (configs scored per chunk × its nodes), not with the file count, so it is quoted as "
      f"measured; the scoring benchmark's processes peaked at {rates.peak}.", "",
      "Work (Σ configs × graph size) of the scaled tree and of the release, and the factor between them:", "",
      statistics.markdown_table(("collection", "scaled tree", "release (estimated)", "factor",
                                 "release configs train / valid / test"), work_rows), "",
      "Where the release's shape comes from. File counts per split (`RELEASE_FILES` in the benchmark): those of "
      "the release's npz tree as the Kaggle competition 'predict-ai-model-runtime' serves it (7,229 tile kernels, "
      "705 layout files; its data page speaks of about 7,000 files and 6 GB); the paper's statistics table was "
      "not at hand to cross-check them. Per-file sizes: the real sample's files (../shared/tpugraphs_sample, byte "
      "for byte from the release), graph size × configs below; layout:nlp's labelled files take the nlp test "
      "file's graph size with layout:xla's labelled config counts of the same search (the sample has no labelled "
      "nlp file); the random-search config count is the one MANIFEST.tsv records for a derived alexnet file of "
      "the release. A dozen files is little: the release estimate is only as good as these sizes.", "",
      statistics.markdown_table(("collection", "labelled files (graph size × configs)", "test files"), sample_rows),
      "", "The scaled tree:", "", tree]
  return "\n".join(lines)


def main(argv):
  del argv
  work = pathlib.Path(_WORK_DIR.value)
  journal = benchmark_results.working_path(_OUT.value, ".jsonl")
  done = {entry["stage"]: entry for entry in benchmark_results.read_journal(journal)}
  npz_root = work / "data" / "npz"
  if done and not npz_root.is_dir():  # the journal's figures belong to a tree that is gone
    print(f"{npz_root} is gone: measuring anew", flush=True)
    journal.unlink()
    done = {}
  if not done:
    shutil.rmtree(work, ignore_errors=True)
  sizes, rates = sample_sizes(), scoring_rates()
  if "generate" not in done:
    started = time.perf_counter()
    generate_tree(work / "data", sizes)
    done["generate"] = {"stage": "generate", "seconds": time.perf_counter() - started}
    benchmark_results.append_to_journal(journal, done["generate"])
  results = []
  for name, command, written in stage_commands(work, npz_root):
    if name not in done:
      shutil.rmtree(written, ignore_errors=True)  # what a killed attempt left would be resumed, not measured
      done[name] = run_stage(name, command, written, work / "logs" / f"{name.replace(' ', '_').replace(':', '_')}.log")
      benchmark_results.append_to_journal(journal, done[name])
    results.append(done[name])
  scaled, release = tree_work(npz_root), release_work(sizes)
  extrapolate(results, scaled, release, work, sizes, rates)
  benchmark_results.write("release_scale", "The real-release path: disk, memory and hours per stage",
                          report(results, scaled, release, npz_root, sizes, rates, done["generate"]["seconds"]),
                          _OUT.value)


if __name__ == "__main__":
  program.run(main)
