"""Training input throughput before and after: configs/s of the trainer's batches, side by side.

  python benchmarks/input_pipeline.py [--baseline main] [--repeats 3] [--out benchmarks/results/input_pipeline.md]

The embedded tile:xla and layout:nlp:default training sets are converted once (by this tree; the
record format is the baseline's too). Then, alternating in fresh processes, the `--baseline`
commit's tpu_graphs (extracted with git archive) and this tree's each build
`inputs.TrainingInputs` for the experiment of the collection and read `--epochs` epochs of it; a
process reports the configs with a measured runtime it was given per second (the first batch, which
includes starting the pipeline, is left out). Tile: batches of 8 kernels x 16 configs, epochs of
one pass over the chunks; layout: the layout recipe's epochs (steps of 4 graphs x 128 configs), graphs
pruned as read. Nothing trains: this is the input pipeline alone, what a TPU's host must keep up
with. Writes the table (median and range over the repeats) as Markdown to --out.
"""

import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

from tpu_graphs.data import locations  # the only import both versions have: the rest is imported where used

_BASELINE = flags.DEFINE_string("baseline", "main", "The git commit to compare with.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Runs per version and collection, alternating.")
_EPOCHS = flags.DEFINE_integer("epochs", 3, "Epochs read per run.")
_OUT = flags.DEFINE_string("out", "benchmarks/results/input_pipeline.md", "Where the Markdown table goes.")
_MEASURE = flags.DEFINE_string("measure", None, "Internal: collection to measure in this process.")
_RECORDS = flags.DEFINE_string("records", None, "Internal: the converted collection of --measure.")

# The collections measured, each with the experiment whose training settings it is read with.
COLLECTIONS = {"tile:xla": "tile", "layout:nlp:default": "layout"}


def measure(collection: str, records_dir: str, epochs: int) -> dict:
  """Reads `epochs` epochs of the trainer's inputs for `collection`; configs/s after the first batch."""
  import tensorflow as tf
  from tpu_graphs.train import experiments, inputs
  experiment = experiments.experiment(COLLECTIONS[collection], collection)
  training = experiment.training
  batches = iter(inputs.TrainingInputs(f"{records_dir}/train", experiment.task(), training["batch_size"],
                                       training["configs_per_graph"], steps_per_epoch=training.get("steps_per_epoch")
                                       ).get_dataset(0, epochs))
  next(batches)
  configs, start = 0, time.perf_counter()
  for _, labels in batches:
    configs += int(tf.reduce_sum(tf.cast(labels >= 0, tf.int32)))
  seconds = time.perf_counter() - start
  import tpu_graphs
  return {"configs": configs, "seconds": seconds, "configs_per_second": configs / seconds,
          "package": str(pathlib.Path(tpu_graphs.__file__).parent)}


def _run(source: pathlib.Path, collection: str, records_dir: pathlib.Path) -> dict:
  """One measurement in a fresh process importing tpu_graphs from `source`."""
  command = [sys.executable, str(pathlib.Path(__file__).resolve()), f"--measure={collection}",
             f"--records={records_dir}", f"--epochs={_EPOCHS.value}"]
  measured = json.loads(locations.run_with_tree(command, source, cwd=str(source)).strip().splitlines()[-1])
  if pathlib.Path(measured["package"]).resolve() != (source / "tpu_graphs").resolve():
    raise RuntimeError(f"measured {measured['package']}, not the tpu_graphs of {source}")
  return measured


def main(argv):
  del argv
  if _MEASURE.value:
    print(json.dumps(measure(_MEASURE.value, _RECORDS.value, _EPOCHS.value)))
    return
  from tpu_graphs.data import storage
  from tpu_graphs.train import experiments, run_experiment
  with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    records = {}
    for collection in COLLECTIONS:
      records[collection] = run_experiment.prepare_records(experiments.experiment(COLLECTIONS[collection], collection),
                                                           locations.EMBEDDED_NPZ, scratch / "records", scratch / "work")
    sources = {f"before ({_BASELINE.value})": locations.checkout(_BASELINE.value, scratch / "baseline"),
               "after (this tree)": locations.REPOSITORY}
    rates = {(version, collection): [] for version in sources for collection in COLLECTIONS}
    for repeat in range(_REPEATS.value):
      for collection in COLLECTIONS:
        for version, source in sources.items():
          result = _run(source, collection, records[collection])
          rates[version, collection].append(result["configs_per_second"])
          print(f"repeat {repeat}: {collection} {version}: {result['configs_per_second']:,.0f} configs/s "
                f"({result['configs']} configs in {result['seconds']:.1f} s)", flush=True)

  memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
  summary = lambda values: (f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})")
  versions = list(sources)
  lines = [f"Training input throughput (`benchmarks/input_pipeline.py`), {datetime.date.today()}, on "
           f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, {memory_gib:.0f} GiB, "
           f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end.",
           f"Command: `python benchmarks/input_pipeline.py {' '.join(sys.argv[1:])}`".rstrip(),
           f"Configs/s delivered by `inputs.TrainingInputs` (no training), median (min–max) over "
           f"{_REPEATS.value} alternating runs of {_EPOCHS.value} epochs each.", "",
           "| training set | " + " | ".join(versions) + " | after / before |", "|---|" + "---:|" * (len(versions) + 1)]
  for collection in COLLECTIONS:
    before, after = (statistics.median(rates[v, collection]) for v in versions)
    lines.append(f"| {collection} (embedded, train) | "
                 + " | ".join(summary(rates[v, collection]) for v in versions) + f" | {after / before:.2f}× |")
  table = "\n".join(lines) + "\n"
  out = pathlib.Path(_OUT.value)
  out.parent.mkdir(parents=True, exist_ok=True)
  with storage.atomic_path(out) as temporary:
    temporary.write_text(table)
  print(table)


if __name__ == "__main__":
  app.run(main)
