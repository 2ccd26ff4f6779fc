"""End to end: the main job's smallest mode leaves every artifact, and each one is usable; a
collection it trained in a worker process trains the same in this process."""

import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import hang_guard
import program_modules
from baselines import submission
from tpu_graphs.data import graphs, locations, npz, predictions
from tpu_graphs.export import ranker, saved_model
from tpu_graphs.export.aot import native_library, signatures
from tpu_graphs.train import experiments, run_experiment

QUICKSTART = pathlib.Path(__file__).resolve().parents[2] / "baselines" / "quickstart.py"
RUNS = {"tile:xla": "tile_xla", "layout:xla:default": "layout_xla_default", "layout:xla:random": "layout_xla_random",
        "layout:nlp:default": "layout_nlp_default", "layout:nlp:random": "layout_nlp_random"}


# What TensorFlow prints when its logs are not silenced (C++ registration errors, TensorRT) or when
# the programs give it cause (retracing, tf.nest, unbuilt layers, SavedModel notices).
TENSORFLOW_NOISE = ("Unable to register", "TensorRT", "retracing", "Mapping types may not work", "UserWarning",
                    "compiled metrics have yet", "Skipping full serialization")


def _main_job(out: pathlib.Path, **popen) -> subprocess.Popen:
  """The smallest-mode main job writing to `out`, with TensorFlow's logging left to the program (no
  TF_CPP_MIN_LOG_LEVEL inherited), in a process group of its own."""
  environment = dict(os.environ, PYTHONPATH=str(QUICKSTART.parents[1]))
  environment.pop("TF_CPP_MIN_LOG_LEVEL", None)
  return subprocess.Popen([sys.executable, str(QUICKSTART), "--mode", "smallest", "--out_dir", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                          start_new_session=True, **popen)


def _running_in_group(group: int) -> list[str]:
  """The processes of process group `group` that still run (zombies left out)."""
  running = []
  for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
    try:
      fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
      continue
    if int(fields[2]) == group and fields[0] != "Z":
      running.append(stat.parent.name)
  return running


def _tree_digests(root: pathlib.Path) -> dict:
  return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
          for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
  """(out_dir, the interrupted process, its stdout, its stderr) of the main job stopped by SIGINT to its
  process group, as Ctrl-C in a terminal sends it, once both workers run their collections."""
  out = tmp_path_factory.mktemp("quickstart")
  job = _main_job(out)
  stdout = []
  for line in job.stdout:  # on a single core, collections run one at a time in the job's own process
    stdout.append(line)
    if line.startswith("[quickstart 2/6]"):
      break
  os.killpg(job.pid, signal.SIGINT)
  rest, stderr = job.communicate(timeout=hang_guard.SECONDS)
  return out, job, "".join(stdout) + rest, stderr


@pytest.fixture(scope="module")
def quickstart(interrupted):
  """(out_dir, the finished process) of the interrupted main job run again to its end."""
  out = interrupted[0]
  # The timeout only guards against a hang: on a 2-core machine shared with other jobs (load average
  # 10) the smallest run takes about 20 minutes.
  job = _main_job(out)
  stdout, stderr = job.communicate(timeout=2400)
  completed = subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)
  assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
  assert f"report: {out / 'report.md'}" in completed.stdout
  return out, completed


@pytest.fixture(scope="module")
def finished_rerun(quickstart):
  """(the digests of every file below out_dir before and after, the process) of the finished main job run
  once more."""
  out = quickstart[0]
  before = _tree_digests(out)
  job = _main_job(out)
  stdout, stderr = job.communicate(timeout=hang_guard.SECONDS)
  assert job.returncode == 0, stdout[-3000:] + stderr[-3000:]
  return before, _tree_digests(out), subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def out_dir(quickstart):
  return quickstart[0]


def test_prints_its_progress_and_results_without_tensorflow_noise(quickstart):
  _, completed = quickstart
  output = completed.stdout + completed.stderr
  assert "[quickstart 6/6]" in completed.stdout and "| layout:nlp:random |" in completed.stdout
  assert [noise for noise in TENSORFLOW_NOISE if noise in output] == [], output[-3000:]


def test_sigint_to_the_process_group_stops_the_job_and_its_workers_with_one_line(interrupted):
  _, job, stdout, stderr = interrupted
  assert job.returncode == 128 + signal.SIGINT, stdout[-3000:] + stderr[-3000:]
  assert stderr.splitlines() == ["quickstart: stopped by SIGINT; its running collections were ended; rerun the same "
                                 "command to resume (converted shards, trained epochs and finished collections are "
                                 "kept)"], stderr[-3000:]
  assert _running_in_group(job.pid) == []


def test_the_interrupted_job_resumes_to_its_end(quickstart):
  """What the interrupted job left (converted shards at most: it stopped as its collections began) is
  resumed; a half-trained run would be resumed from its last checkpoint (tests/programs/test_training_program_faults.py)."""
  _, completed = quickstart
  assert "[quickstart 6/6]" in completed.stdout and completed.stderr.count("Traceback") == 0


def test_a_rerun_of_a_finished_job_writes_nothing_and_prints_the_same_table(quickstart, finished_rerun):
  before, after, rerun = finished_rerun
  assert after == before
  for collection in RUNS:
    assert f"{collection}: kept (its weights, data and code" in rerun.stdout
  table = [line for line in quickstart[1].stdout.splitlines() if line.startswith("| ")]
  assert table and [line for line in rerun.stdout.splitlines() if line.startswith("| ")] == table
  assert "nothing to do: every output is current" in rerun.stdout


def test_a_collection_is_kept_only_for_the_experiment_code_and_outputs_its_record_names(out_dir, tmp_path):
  program = program_modules.load("quickstart")
  code, data_root = program.code_version(), locations.EMBEDDED_NPZ.resolve()
  shutil.copytree(out_dir / "runs" / "tile_xla", tmp_path / "runs" / "tile_xla")
  assert program.kept_outcome("smallest", "tile:xla", data_root, tmp_path, code) is not None
  assert program.kept_outcome("quickstart", "tile:xla", data_root, tmp_path, code) is None
  assert program.kept_outcome("smallest", "tile:xla", data_root, tmp_path, "another version") is None
  with open(tmp_path / "runs" / "tile_xla" / "predictions.csv", "a") as predictions_file:
    predictions_file.write("\n")
  assert program.kept_outcome("smallest", "tile:xla", data_root, tmp_path, code) is None


def test_collections_train_side_by_side_and_their_lines_name_them(quickstart):
  _, completed = quickstart
  at_once = min(len(RUNS), os.cpu_count() or 1)
  if at_once > 1:
    assert f"[quickstart] {at_once} collections at a time, each in its own process" in completed.stdout
  for collection in RUNS:
    assert f"  [{collection}] valid: {{" in completed.stdout, completed.stdout[-3000:]


def test_a_collection_trains_the_same_in_this_process_as_in_the_main_jobs_worker(out_dir, tmp_path):
  program = program_modules.load("quickstart")
  collection = "layout:nlp:random"
  outcome = program.run_collection("smallest", collection, locations.EMBEDDED_NPZ, tmp_path)
  here, there = tmp_path / "runs" / RUNS[collection], out_dir / "runs" / RUNS[collection]
  assert outcome.predictions == here / "predictions.csv"
  assert outcome.predictions.read_text() == (there / "predictions.csv").read_text()
  assert json.loads((here / "history.json").read_text()) == json.loads((there / "history.json").read_text())


def test_submission_covers_every_test_graph_and_validates(out_dir):
  rows = predictions.read_predictions(out_dir / "submission.csv")
  counts = submission.test_config_counts(locations.EMBEDDED_NPZ)
  submission.validate(rows, counts, source="quickstart submission")
  assert {p.collection for p in rows} == set(graphs.COLLECTIONS)
  assert len(rows) == len(counts)


def test_every_embedded_file_is_converted_to_records(out_dir):
  """Each split's manifest lists every npz file of the embedded tree, by name and content, once: the
  generated data converts whole (tests/synth/test_generate.py regenerates it byte for byte, so this
  conversion, which the main job does anyway, also covers the generator's files)."""
  embedded = sorted(locations.EMBEDDED_NPZ.rglob("*.npz"))
  assert len(embedded) > 300
  for split_dir in sorted({path.parent for path in embedded}):
    manifest = json.loads((out_dir / "records" / split_dir.relative_to(locations.EMBEDDED_NPZ) /
                           "manifest.json").read_text())
    converted = sorted((g["source"], g["source_sha256"]) for shard in manifest["shards"] for g in shard["graphs"])
    assert converted == sorted((path.name, hashlib.sha256(path.read_bytes()).hexdigest())
                               for path in split_dir.glob("*.npz")), split_dir


@pytest.mark.parametrize("collection", sorted(RUNS))
def test_each_run_records_the_experiment_it_resolved(out_dir, collection):
  recorded = json.loads((out_dir / "runs" / RUNS[collection] / "config.json").read_text())
  assert recorded["experiment"] == {"name": "smallest", "collection": collection,
                                    "data_root": str(locations.EMBEDDED_NPZ.resolve())}
  assert recorded["epochs"] == 1 and recorded["model"]["units"] == 16


@pytest.mark.parametrize("collection", sorted(RUNS))
def test_saved_model_loads_and_scores_a_valid_graph(out_dir, collection):
  serving = ranker.Ranker(out_dir / "runs" / RUNS[collection] / saved_model.EXPORT_DIR_NAME)
  path = sorted((locations.EMBEDDED_NPZ / pathlib.Path(*collection.split(":")) / "valid").glob("*.npz"))[0]
  graph = npz.read_graph(path)
  ranking = serving.rank(graph)
  assert ranking.scores.shape == (graph.num_configs,) and np.all(np.isfinite(ranking.scores))
  assert sorted(ranking.order.tolist()) == list(range(graph.num_configs))


@pytest.mark.parametrize("collection", ["tile:xla", "layout:xla:default"])
def test_a_run_exported_again_with_static_signatures_scores_as_its_export(out_dir, collection, tmp_path):
  """What compile_native.py compiles from a run: its best model rebuilt from config.json, with the
  static signatures its export leaves out."""
  run_dir = out_dir / "runs" / RUNS[collection]
  saved_model.export_run(run_dir, tmp_path / "static", signatures.static_functions)
  assert native_library.static_buckets(tmp_path / "static") and not native_library.static_buckets(
      run_dir / saved_model.EXPORT_DIR_NAME)
  graph = npz.read_graph(sorted((locations.EMBEDDED_NPZ / pathlib.Path(*collection.split(":")) / "valid").glob("*.npz"))[0])
  exported = ranker.Ranker(run_dir / saved_model.EXPORT_DIR_NAME).score(graph)
  np.testing.assert_allclose(ranker.Ranker(tmp_path / "static").score(graph), exported, rtol=1e-5, atol=1e-6)
  assert np.ptp(exported) > 0


def test_report_holds_all_five_collections_and_its_plots(out_dir):
  text = (out_dir / "report.md").read_text()
  for collection in RUNS:
    assert f"| {collection} |" in text
  assert "**generated** data" in text
  for image in ("training_curves.png", "rank_scatter.png", "tile_top_k_error.png", "kendall_per_graph.png"):
    assert f"]({image})" in text and (out_dir / image).read_bytes()[:4] == b"\x89PNG"


def test_generated_data_trains_the_quickstart_runs_and_any_other_root_the_recipe(tmp_path):
  program = program_modules.load("quickstart")
  assert program.chosen_experiment(None, locations.EMBEDDED_NPZ) == "quickstart"
  assert program.chosen_experiment(None, tmp_path / "npz") == "recipe"  # no GENERATED.md: the real release
  assert program.chosen_experiment("smallest", tmp_path / "npz") == "smallest"
  for collection in RUNS:
    recipe = program.collection_experiment("recipe", collection)
    kind_default = experiments.experiment(graphs.collection_kind(collection), collection)
    assert (recipe.training, recipe.model) == (kind_default.training, kind_default.model)
  assert program.collection_experiment("recipe", "layout:xla:random").model.graph_norm  # what real files favour


def test_a_rerun_says_it_resumes_a_finished_run(out_dir):
  experiment = experiments.experiment("smallest", "tile:xla")
  assert run_experiment.progress_line(experiment, out_dir / "runs/tile_xla") == (
      "resume: all 1 epoch(s) trained already; evaluate")
  longer = experiment.overridden(training={"epochs": 3})
  assert run_experiment.progress_line(longer, out_dir / "runs/tile_xla") == (
      "resume after epoch 1: convert what is missing, train epochs 2-3")


def test_evaluate_reads_collection_and_data_root_from_the_run(out_dir, tmp_path):
  run_dir = out_dir / "runs" / RUNS["layout:nlp:random"]
  environment = dict(os.environ, PYTHONPATH=str(QUICKSTART.parents[1]))
  completed = subprocess.run([sys.executable, str(QUICKSTART.parent / "evaluate.py"), f"--run_dir={run_dir}",
                              "--split=valid", f"--out_dir={tmp_path}"],
                             capture_output=True, text=True, timeout=600, env=environment)
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert f"{run_dir}: layout:nlp:random, valid split of {locations.EMBEDDED_NPZ.resolve()}" in completed.stdout
  evaluated = json.loads((tmp_path / "metrics_valid.json").read_text())
  trained = json.loads((run_dir / "metrics.json").read_text())["valid"]
  assert evaluated["mean"] == pytest.approx(trained["mean"], abs=1e-6)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
