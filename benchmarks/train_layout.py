"""Layout model speed and memory: scoring every config of a graph, and training throughput.

  python benchmarks/train_layout.py all [--parts score,train] [--out benchmarks/results/train_layout.md]
  python benchmarks/train_layout.py score --npz <file.npz> [--prune_hops 1]
  python benchmarks/train_layout.py train --npz_dir <dir of layout train npz> [--prune_hops -1] [--dedup]
      [--normalize] [--segment_size 1000] [--steps 20]
  python benchmarks/train_layout.py generated_tau [--epochs 3]

`score`: converts the file to records (chunks of --configs_per_chunk configs) and scores every
config with an (untrained) layout model through scoring.score_records; prints seconds of scoring
(conversion apart) and the process's peak RSS. `train`: --steps steps of --batch_size chunks with
--configs_per_graph configs each; prints configs/s, s/epoch (the epoch's steps at that rate) and
peak RSS. One measurement per process, so peak RSS belongs to it alone: `all` runs each in a
fresh process (scoring the real sample's unet_3d.4x4.bf16 and nlp test graph at 0 and 1 hops;
training on the generated xla and nlp default train splits with each scale technique) and writes
the tables to --out (benchmarks/benchmark_results.py). The sample is found as the tests find it.
"""

import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads
import tensorflow as tf  # pylint: disable=g-bad-import-order

from benchmarks import benchmark_results
from tpu_graphs.data import config_dedup, convert, errors, graphs, locations, npz, records
from tpu_graphs.models import layout_model, layout_preprocessing
from tpu_graphs.train import experiments, inputs, padding, run_experiment, scoring, tasks, trainer, weight_average

GENERATED = locations.EMBEDDED_NPZ / "layout"
MODES = ("score", "train", "steps", "generated_tau", "all")
# The real graphs `all` scores, inside the sample folder (locations.sample_dir()).
SCORED_GRAPHS = ("npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz",
                 "npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz")
TECHNIQUES = (("--prune_hops=-1",), ("--prune_hops=0",), ("--prune_hops=1",), ("--prune_hops=0", "--dedup"),
              ("--prune_hops=0", "--dedup", "--normalize"),
              ("--prune_hops=0", "--dedup", "--normalize", "--segment_size=200"))

_NPZ = flags.DEFINE_string("npz", None, "score: the layout npz file.")
_NPZ_DIR = flags.DEFINE_string("npz_dir", None, "train: a layout .../<split> directory of npz files.")
_STRESS_DIR = flags.DEFINE_string("stress_dir", None, "all: also train on this directory (e.g. generate_stress.py output).")
_PARTS = flags.DEFINE_list("parts", ["score", "train"], "all: which tables to measure (score, train).")
_SCORE_HOPS = flags.DEFINE_list("score_hops", ["0", "1"], "all: the prune_hops each real graph is scored with.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("train_layout")), "all: Markdown tables to write.")
_PRUNE_HOPS = flags.DEFINE_integer("prune_hops", 0, "-1 = no pruning.")
_DEDUP = flags.DEFINE_bool("dedup", False, "train: merge configs with identical features first.")
_NORMALIZE = flags.DEFINE_bool("normalize", False, "train: standardize op features with training statistics.")
_SEGMENT_SIZE = flags.DEFINE_integer("segment_size", 0, "train: Graph Segment Training's segment size; 0 = off.")
_CONFIGS_PER_CHUNK = flags.DEFINE_integer("configs_per_chunk", 64, "Configs per config-chunk record.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 4, "train: chunks per step.")
_CONFIGS_PER_GRAPH = flags.DEFINE_integer("configs_per_graph", 16, "train: configs per chunk and step.")
_STEPS = flags.DEFINE_integer("steps", 20, "train: timed steps (at most an epoch).")
_UNITS = flags.DEFINE_integer("units", 64, "Hidden width.")
_LAYERS = flags.DEFINE_integer("layers", 3, "Message passing rounds.")
_LOSS = flags.DEFINE_string("loss", "pairwise_hinge:1", "train: the loss.")
_EPOCHS = flags.DEFINE_integer("epochs", 3, "generated_tau: training epochs.")
_JIT_COMPILE = flags.DEFINE_bool("jit_compile", False, "steps: an XLA-compiled step on inputs padded to static sizes, "
                                 "as under TPUStrategy.")
_COLLECTION = flags.DEFINE_string("collection", "layout:nlp:default", "steps: the embedded collection to train on.")


def peak_rss_gb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _model(spec, statistics=None):
  return layout_model.build_layout_model(
      spec.relax(num_components=True, num_nodes=True, num_edges=True), units=_UNITS.value, num_layers=_LAYERS.value,
      feature_statistics=statistics,
      segment_size=_SEGMENT_SIZE.value or None)


def _task() -> tasks.LayoutTask:
  """The layout task; it prunes each graph once as it is read (not the model, once per chunk)."""
  return tasks.LayoutTask(experiments.from_flag_value(experiments.LayoutSettings, "prune_hops", _PRUNE_HOPS.value))


def score() -> None:
  source = pathlib.Path(_NPZ.value)
  with tempfile.TemporaryDirectory() as temporary:
    graph = npz.read_graph(source, stream_configs=True)
    relative = pathlib.Path(*graph.collection.split(":"), graph.split or "test")
    (pathlib.Path(temporary) / "npz" / relative).mkdir(parents=True)
    (pathlib.Path(temporary) / "npz" / relative / source.name).symlink_to(source.resolve())
    convert.convert_directory(pathlib.Path(temporary) / "npz", pathlib.Path(temporary) / "records",
                              configs_per_chunk=_CONFIGS_PER_CHUNK.value, progress=False)
    model = _model(records.graph_spec("layout"))
    start = time.perf_counter()
    scored = scoring.score_records(_task(), model, pathlib.Path(temporary) / "records" / relative,
                                   batch_size=1)
    seconds = time.perf_counter() - start
  (_, scores), = scored.values()
  print("score " + json.dumps({"graph": source.stem, "ops": int(graph.node_feat.shape[0]), "configs": int(scores.size),
                               "prune_hops": _PRUNE_HOPS.value, "seconds": seconds, "peak_rss_gb": peak_rss_gb()}))


def train() -> None:
  with tempfile.TemporaryDirectory() as temporary:
    train_npz = pathlib.Path(_NPZ_DIR.value)
    if _DEDUP.value:
      deduplicated = pathlib.Path(temporary) / "dedup" / train_npz.relative_to(train_npz.parents[3])
      counts = config_dedup.deduplicate_directory(train_npz, deduplicated)
      print("dedup: " + ", ".join(f"{pathlib.Path(name).stem} {b}->{a}" for name, (b, a) in counts.items()))
      train_npz = deduplicated
    convert.convert_directory(train_npz, pathlib.Path(temporary) / "records", configs_per_chunk=_CONFIGS_PER_CHUNK.value,
                              progress=False)
    statistics = layout_preprocessing.op_feature_statistics(
        npz.read_graph(p, stream_configs=True).node_feat for p in sorted(train_npz.glob("*.npz"))) \
        if _NORMALIZE.value else None
    records_dir = next((pathlib.Path(temporary) / "records").rglob("manifest.json")).parent
    task = _task()
    training_inputs = inputs.TrainingInputs(records_dir, task, _BATCH_SIZE.value, _CONFIGS_PER_GRAPH.value)
    batches = training_inputs.get_dataset(first_epoch=0, epochs=1)
    model = trainer.RankingModel(_model(training_inputs.graph_spec(), statistics), task, _CONFIGS_PER_GRAPH.value)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss=task.loss(_LOSS.value))
    model.fit(batches.take(2), verbose=0)  # tracing and warm-up
    epoch_steps = training_inputs.steps_per_epoch
    steps = min(_STEPS.value, epoch_steps)
    start = time.perf_counter()
    model.fit(batches.take(steps), verbose=0)
    seconds = time.perf_counter() - start
  configs = steps * _BATCH_SIZE.value * _CONFIGS_PER_GRAPH.value
  print("train " + json.dumps({"configs_per_s": configs / seconds, "seconds_per_epoch": seconds / steps * epoch_steps,
                               "epoch_steps": epoch_steps, "peak_rss_gb": peak_rss_gb()}))


def steps() -> None:
  """Steps per second of the layout recipe's training step (its model, lists and loss, as
  baselines/layout_train.py trains them) on an embedded collection's train split: eager, or
  XLA-compiled on padded inputs (--jit_compile), as the trainer runs each."""
  experiment = experiments.experiment("layout", _COLLECTION.value)
  training = experiment.training
  with tempfile.TemporaryDirectory() as temporary:
    records_dir = run_experiment.prepare_records(experiment, locations.EMBEDDED_NPZ, temporary, temporary)
    task = experiment.task()
    training_inputs = inputs.TrainingInputs(f"{records_dir}/train", task, training["batch_size"],
                                            training["configs_per_graph"], 0, training["steps_per_epoch"])
    static_padding = None
    if _JIT_COMPILE.value:
      static_padding = padding.Padding.fitting(training_inputs.sampled_graphs(0), training["batch_size"])
    spec = training_inputs.graph_spec(1, static_padding).relax(num_components=True, num_nodes=True, num_edges=True)
    scorer = experiment.model.model_builder(run_experiment.data_derived(
        experiment, graphs.collection_directory(locations.EMBEDDED_NPZ, experiment.collection)))(spec)
    average = weight_average.averaging(scorer.trainable_variables, training.get("weight_average", 0.0))
    model = trainer.RankingModel(scorer, task, training["configs_per_graph"], average)  # as the trainer's step
    model.compile(optimizer=tf.keras.optimizers.Adam(training["learning_rate"]), loss=task.loss(training["loss"]),
                  jit_compile=_JIT_COMPILE.value)
    batches = training_inputs.get_dataset(0, 1, None, static_padding).cache()
    count = min(_STEPS.value, training_inputs.steps_per_epoch)
    warm_up = 3
    model.fit(batches.take(warm_up), verbose=0)  # tracing, compiling and warm-up
    start = time.perf_counter()
    model.fit(batches.skip(warm_up).take(count), verbose=0)
    seconds = time.perf_counter() - start
  print("steps " + json.dumps({"collection": _COLLECTION.value, "jit_compile": _JIT_COMPILE.value,
                               "steps_per_s": count / seconds, "peak_rss_gb": peak_rss_gb()}))


def _train_and_validate(data_root: pathlib.Path, source: str, search: str, out_dir: pathlib.Path) -> str:
  """Runs baselines/layout_train.py on one collection of `data_root`; its validation line."""
  command = [sys.executable, str(locations.REPOSITORY / "baselines" / "layout_train.py"), f"--source={source}",
             f"--search={search}", f"--data_root={data_root}", f"--out_dir={out_dir}", f"--epochs={_EPOCHS.value}",
             f"--prune_hops={_PRUNE_HOPS.value}", "--patience=100"]
  start = time.perf_counter()
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  seconds = time.perf_counter() - start
  if result.returncode:
    return f"layout:{source}:{search} failed: {result.stderr[-2000:]}"
  metrics = json.loads((out_dir / "metrics.json").read_text())
  per_graph = ", ".join(f"{key.split(':')[-1]} {m['kendall_tau']:.3f}" for key, m in metrics["valid"]["per_graph"].items())
  mean = metrics["valid"]["mean"]
  return (f"tau layout:{source}:{search} ({_EPOCHS.value} epochs, {seconds:.0f} s): valid Kendall tau {mean['kendall_tau']:.3f}, "
          f"OPA {mean['opa']:.3f}, top-1 slowdown {mean['top1_slowdown']:.3f}; per graph: {per_graph}")


def generated_tau() -> None:
  """Kendall's tau on the valid split of each generated layout collection (data/generated)."""
  with tempfile.TemporaryDirectory() as temporary:
    for source, search in (("xla", "default"), ("xla", "random"), ("nlp", "default"), ("nlp", "random")):
      print(_train_and_validate(locations.EMBEDDED_NPZ, source, search, pathlib.Path(temporary) / f"{source}_{search}"),
          flush=True)


def _measured(run: list[str]) -> dict:
  """The JSON line a `score` or `train` run of this program prints, measured in a fresh process."""
  result = subprocess.run([sys.executable, __file__, *run], capture_output=True, text=True, check=False)
  lines = [line for line in result.stdout.splitlines() if line.startswith(run[0] + " ")]
  if result.returncode or not lines:
    raise RuntimeError(f"{' '.join(run)} failed: {result.stderr[-2000:]}")
  return json.loads(lines[-1].split(" ", 1)[1])


def score_table() -> list[str]:
  rows = ["| graph | ops | configs | prune hops | seconds | configs/s | peak RSS |", "|---|---:|---:|---:|---:|---:|---:|"]
  for relative in SCORED_GRAPHS:
    path = locations.sample_path(relative)
    for hops in map(int, _SCORE_HOPS.value):
      m = _measured(["score", f"--npz={path}", f"--prune_hops={hops}", f"--units={_UNITS.value}",
                     f"--layers={_LAYERS.value}"])
      rows.append(f"| {m['graph']} | {m['ops']:,} | {m['configs']:,} | {hops} | {m['seconds']:.1f} | "
                  f"{m['configs'] / m['seconds']:,.0f} | {m['peak_rss_gb']:.2f} GB |")
  return rows


def train_table() -> list[str]:
  directories = [GENERATED / collection / "train" for collection in ("xla/default", "nlp/default")]
  rows = ["| train split | technique | configs/s | s/epoch | peak RSS |", "|---|---|---:|---:|---:|"]
  for directory in directories + ([pathlib.Path(_STRESS_DIR.value)] if _STRESS_DIR.value else []):
    stress = directory not in directories
    for technique in TECHNIQUES[1:2] + TECHNIQUES[3:] if stress else TECHNIQUES:
      m = _measured(["train", f"--npz_dir={directory}", f"--steps={_STEPS.value}", *technique]
                    + (["--batch_size=2", "--steps=10"] if stress else []))
      rows.append(f"| {directory.relative_to(directory.parents[2]) if not stress else directory} | "
                  f"{' '.join(t.lstrip('-') for t in technique)} | {m['configs_per_s']:,.0f} | "
                  f"{m['seconds_per_epoch']:.0f} | {m['peak_rss_gb']:.2f} GB |")
  return rows


def run_all() -> None:
  """The tables of --parts, each measurement in its own process, written to --out."""
  parts = []
  if "score" in _PARTS.value:
    parts.append(f"Scoring every config of a real graph with an untrained model ({_UNITS.value} units, "
                 f"{_LAYERS.value} layers; conversion to records apart):\n\n" + "\n".join(score_table()))
  if "train" in _PARTS.value:
    parts.append(f"Training on the generated train splits, {_STEPS.value} timed steps of {_BATCH_SIZE.value} chunks "
                 f"× {_CONFIGS_PER_GRAPH.value} configs after 2 warm-up steps:\n\n" + "\n".join(train_table()))
  benchmark_results.write("train_layout", "Layout model speed and memory", "\n\n".join(parts), _OUT.value)


def main(argv):
  if len(argv) != 2 or argv[1] not in MODES:
    raise errors.InputError(f"train_layout: give one mode of {', '.join(MODES)} (got {' '.join(argv[1:]) or 'none'})")
  {"score": score, "train": train, "steps": steps, "generated_tau": generated_tau, "all": run_all}[argv[1]]()


if __name__ == "__main__":
  program.run(main)
