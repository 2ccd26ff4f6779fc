"""Layout model speed and memory: scoring every config of a graph, and training throughput.

  python benchmarks/train_layout.py score --npz <file.npz> [--prune_hops 1]
  python benchmarks/train_layout.py train --npz_dir <dir of layout train npz> [--prune_hops -1] [--dedup]
      [--normalize] [--segment_size 1000] [--steps 20]
  python benchmarks/train_layout.py all   # every figure below, each in a fresh process

`score`: converts the file to records (chunks of --configs_per_chunk configs) and scores every
config with an (untrained) layout model through scoring.score_records; prints seconds of scoring
(conversion apart) and the process's peak RSS. `train`: --steps steps of --batch_size chunks with
--configs_per_graph configs each; prints configs/s, s/epoch (the epoch's steps at that rate) and
peak RSS. One measurement per process, so peak RSS belongs to it alone.
"""

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

from tpu_graphs.data import config_dedup, convert, locations, npz, records
from tpu_graphs.models import layout_model, layout_preprocessing
from tpu_graphs.train import inputs, scoring, tasks, trainer

GENERATED = locations.EMBEDDED_NPZ / "layout"



def peak_rss_gb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _model(spec, args, statistics=None):
  return layout_model.build_layout_model(
      spec.relax(num_components=True, num_nodes=True, num_edges=True), units=args.units, num_layers=args.layers,
      feature_statistics=statistics,
      segment_size=args.segment_size or None)


def _task(args) -> tasks.LayoutTask:
  """The layout task; it prunes each graph once as it is read (not the model, once per chunk)."""
  return tasks.LayoutTask(prune_hops=args.prune_hops if args.prune_hops >= 0 else None)


def score(args) -> None:
  source = pathlib.Path(args.npz)
  with tempfile.TemporaryDirectory() as temporary:
    graph = npz.read_graph(source, stream_configs=True)
    relative = pathlib.Path(*graph.collection.split(":"), graph.split or "test")
    (pathlib.Path(temporary) / "npz" / relative).mkdir(parents=True)
    (pathlib.Path(temporary) / "npz" / relative / source.name).symlink_to(source.resolve())
    convert.convert_directory(pathlib.Path(temporary) / "npz", pathlib.Path(temporary) / "records",
                              configs_per_chunk=args.configs_per_chunk, progress=False)
    model = _model(records.graph_spec("layout"), args)
    start = time.perf_counter()
    scored = scoring.score_records(_task(args), model, pathlib.Path(temporary) / "records" / relative,
                                   batch_size=1)
    seconds = time.perf_counter() - start
  (_, scores), = scored.values()
  print(f"score {source.name}: {graph.node_feat.shape[0]} nodes, {scores.size} configs scored in {seconds:.1f} s "
        f"({scores.size / seconds:.0f} configs/s), prune_hops {args.prune_hops}, peak RSS {peak_rss_gb():.2f} GB")


def train(args) -> None:
  with tempfile.TemporaryDirectory() as temporary:
    train_npz = pathlib.Path(args.npz_dir)
    if args.dedup:
      deduplicated = pathlib.Path(temporary) / "dedup" / train_npz.relative_to(train_npz.parents[3])
      counts = config_dedup.deduplicate_directory(train_npz, deduplicated)
      print("dedup: " + ", ".join(f"{pathlib.Path(name).stem} {b}->{a}" for name, (b, a) in counts.items()))
      train_npz = deduplicated
    convert.convert_directory(train_npz, pathlib.Path(temporary) / "records", configs_per_chunk=args.configs_per_chunk,
                              progress=False)
    statistics = layout_preprocessing.op_feature_statistics(
        npz.read_graph(p, stream_configs=True).node_feat for p in sorted(train_npz.glob("*.npz"))) \
        if args.normalize else None
    records_dir = next((pathlib.Path(temporary) / "records").rglob("manifest.json")).parent
    task = _task(args)
    training_inputs = inputs.TrainingInputs(records_dir, task, args.batch_size, args.configs_per_graph)
    batches = training_inputs.get_dataset(first_epoch=0, epochs=1)
    model = trainer.RankingModel(_model(training_inputs.graph_spec(), args, statistics), task, args.configs_per_graph)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss=task.loss(args.loss))
    model.fit(batches.take(2), verbose=0)  # tracing and warm-up
    epoch_steps = training_inputs.steps_per_epoch
    steps = min(args.steps, epoch_steps)
    start = time.perf_counter()
    model.fit(batches.take(steps), verbose=0)
    seconds = time.perf_counter() - start
  configs = steps * args.batch_size * args.configs_per_graph
  print(f"train {pathlib.Path(args.npz_dir)}: prune_hops {args.prune_hops} dedup {args.dedup} normalize "
        f"{args.normalize} segment_size {args.segment_size}: {configs / seconds:.0f} configs/s, "
        f"{seconds / steps * epoch_steps:.0f} s/epoch ({epoch_steps} steps), peak RSS {peak_rss_gb():.2f} GB")


def _train_and_validate(data_root: pathlib.Path, source: str, search: str, out_dir: pathlib.Path, args) -> str:
  """Runs baselines/layout_train.py on one collection of `data_root`; its validation line."""
  command = [sys.executable, str(locations.REPOSITORY / "baselines" / "layout_train.py"), f"--source={source}",
             f"--search={search}", f"--data_root={data_root}", f"--out_dir={out_dir}", f"--epochs={args.epochs}",
             f"--prune_hops={args.prune_hops}", "--patience=100"]
  start = time.perf_counter()
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  seconds = time.perf_counter() - start
  if result.returncode:
    return f"layout:{source}:{search} failed: {result.stderr[-2000:]}"
  metrics = json.loads((out_dir / "metrics.json").read_text())
  per_graph = ", ".join(f"{key.split(':')[-1]} {m['kendall_tau']:.3f}" for key, m in metrics["valid"]["per_graph"].items())
  mean = metrics["valid"]["mean"]
  return (f"tau layout:{source}:{search} ({args.epochs} epochs, {seconds:.0f} s): valid Kendall tau {mean['kendall_tau']:.3f}, "
          f"OPA {mean['opa']:.3f}, top-1 slowdown {mean['top1_slowdown']:.3f}; per graph: {per_graph}")


def generated_tau(args) -> None:
  """Kendall's tau on the valid split of each generated layout collection (data/generated)."""
  with tempfile.TemporaryDirectory() as temporary:
    for source, search in (("xla", "default"), ("xla", "random"), ("nlp", "default"), ("nlp", "random")):
      print(_train_and_validate(locations.EMBEDDED_NPZ, source, search, pathlib.Path(temporary) / f"{source}_{search}",
                                args), flush=True)


def run_all(args) -> None:
  """Every figure, each in its own process."""
  sample = locations.SAMPLE_NPZ / "layout"
  command = [sys.executable, __file__]
  runs = [["score", "--npz", str(sample / "xla/default/valid/unet_3d.4x4.bf16.npz"), "--prune_hops", str(hops)]
          for hops in (0, 1)]
  runs += [["score", "--npz", str(sample / "nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"), "--prune_hops", str(hops)]
           for hops in (0, 1)]
  techniques = [["--prune_hops", "-1"], ["--prune_hops", "0"], ["--prune_hops", "1"], ["--prune_hops", "0", "--dedup"],
                ["--prune_hops", "0", "--dedup", "--normalize"],
                ["--prune_hops", "0", "--dedup", "--normalize", "--segment_size", "200"]]
  for collection in ("xla/default", "nlp/default"):
    runs += [["train", "--npz_dir", str(GENERATED / collection / "train")] + flags for flags in techniques]
  if args.stress_dir:
    runs += [["train", "--npz_dir", args.stress_dir, "--batch_size", "2", "--steps", "10"] + flags
             for flags in techniques[1:2] + techniques[3:]]
  for run in runs:
    result = subprocess.run(command + run, capture_output=True, text=True, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("score", "train", "dedup"))]
    print("\n".join(lines) if lines else f"{' '.join(run)} failed: {result.stderr[-2000:]}", flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("mode", choices=["score", "train", "generated_tau", "all"])
  parser.add_argument("--npz", help="score: the layout npz file")
  parser.add_argument("--npz_dir", help="train: a layout .../<split> directory of npz files")
  parser.add_argument("--stress_dir", help="all: also train on this directory (e.g. generate_stress.py output)")
  parser.add_argument("--prune_hops", type=int, default=0, help="-1 = no pruning")
  parser.add_argument("--dedup", action="store_true")
  parser.add_argument("--normalize", action="store_true")
  parser.add_argument("--segment_size", type=int, default=0)
  parser.add_argument("--configs_per_chunk", type=int, default=64)
  parser.add_argument("--batch_size", type=int, default=4)
  parser.add_argument("--configs_per_graph", type=int, default=16)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--units", type=int, default=64)
  parser.add_argument("--layers", type=int, default=3)
  parser.add_argument("--loss", default="pairwise_hinge:1")
  parser.add_argument("--epochs", type=int, default=3, help="generated_tau: training epochs")
  args = parser.parse_args()
  {"score": score, "train": train, "generated_tau": generated_tau, "all": run_all}[args.mode](args)


if __name__ == "__main__":
  main()
