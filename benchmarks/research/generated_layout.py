"""Ranking programs the model never saw: the layout recipe across the generated layout collections.

  python benchmarks/research/generated_layout.py                                   # the quickstart's layout runs
  python benchmarks/research/generated_layout.py --variant "GraphNorm=--graph_norm" --variant "ListMLE=--loss=listmle:1"
  python benchmarks/research/generated_layout.py --previous_commit=                 # without the previous default

For each of the four generated layout collections, `baselines/layout_train.py` trains the named
experiment (default `quickstart`, the main job's layout settings) on the collection's train
programs and selects its epoch on the valid programs; each variant is the same run with extra
flags. Reported per collection: the valid tau of the kept epoch (what the quickstart's report
shows) and the test tau, scored from the run's predictions.csv against the generator's hidden test
labels (never seen in training or selection). Programs differ between the splits (layout:xla:
mobilenet and vgg16 valid, resnet50_v2 and unet test; layout:nlp: mlp_mixer valid, lstm test), so
this measures what real use needs: ranking a new program's configs.

The previous default is the main job of --previous_commit (checked out into a temporary folder)
run on the same generated tree, its layout runs scored the same way: the bar a change of the
recipe must not fall below is then measured on today's data, not quoted from an older generator.

Writes a Markdown table with the machine, date, command and commit to --out (and prints it) and a
bar plot beside its journal (out/benchmarks/<--out's name>.png). Each (collection, variant)'s result
is appended to that journal (.jsonl) as soon as it is known, and a rerun after a kill trains only
what is missing (delete it to measure anew).
"""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile
import time

import numpy as np
from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads

from benchmarks import benchmark_results
from tpu_graphs.data import graphs, locations, predictions
from tpu_graphs.train import metrics

_DATA_DIR = flags.DEFINE_string("data_dir", str(locations.EMBEDDED_NPZ.parent),
                                "A generated tree: npz/ and test_labels/ (baselines/generate.py).")
_EXPERIMENT = flags.DEFINE_string("experiment", "quickstart", "The experiment layout_train.py starts from.")
_VARIANT = flags.DEFINE_multi_string("variant", [], "NAME=FLAGS: also train with these extra layout_train.py flags "
                                     "(space-separated), e.g. 'GraphNorm=--graph_norm'; repeat for more.")
LAYOUT_COLLECTIONS = [c for c in graphs.COLLECTIONS if c.startswith("layout:")]
_COLLECTIONS = flags.DEFINE_list("collections", LAYOUT_COLLECTIONS, "Which layout collections.")
_PREVIOUS_COMMIT = flags.DEFINE_string("previous_commit", "d1dd45b",
                                       "Commit whose main job (baselines/quickstart.py) trains the 'previous "
                                       "default' on the same data; '' = skip.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("generated_layout")), "Markdown table to write.")

RECIPE = "recipe"
PREVIOUS = "previous default"


def parsed_variants(specs: list[str]) -> list[tuple[str, list[str]]]:
  """[(name, extra flags)], the recipe first."""
  variants = [(RECIPE, [])]
  for spec in specs:
    name, _, extra = spec.partition("=")
    if not name or name == RECIPE or name in dict(variants):
      raise ValueError(f"--variant {spec!r}: needs a new NAME=FLAGS")
    variants.append((name, extra.split()))
  return variants


def hidden_labels(data_dir: pathlib.Path, collection: str) -> dict[str, np.ndarray]:
  """{graph id (file stem): true runtimes} of the collection's test files."""
  label_dir = data_dir / "test_labels" / graphs.collection_directory("", collection) / "test"
  labels = {path.stem: np.load(path) for path in sorted(label_dir.glob("*.npy"))}
  if not labels:
    raise FileNotFoundError(f"{label_dir}: no hidden test labels; pass --data_dir=<a generated tree>")
  return labels


def test_taus(predictions_csv: pathlib.Path, labels: dict[str, np.ndarray]) -> dict[str, float]:
  """{graph id: Kendall tau} of a run's predicted order (best first) against the true runtimes."""
  taus = {}
  for prediction in predictions.read_predictions(predictions_csv):
    runtimes = labels[prediction.graph_id]
    try:
      taus[prediction.graph_id] = metrics.kendall_tau(runtimes, prediction.positions(len(runtimes)))
    except ValueError as error:
      raise ValueError(f"{predictions_csv}: {error}") from None
  if set(taus) != set(labels):
    raise ValueError(f"{predictions_csv}: ranks {sorted(taus)}, the test split holds {sorted(labels)}")
  return taus


def scored_run(collection: str, run_dir: pathlib.Path) -> dict:
  """{valid tau of the kept epoch, test tau per graph and mean} of a finished layout_train.py run."""
  run = json.loads((run_dir / "metrics.json").read_text())
  taus = test_taus(run_dir / "predictions.csv", hidden_labels(pathlib.Path(_DATA_DIR.value), collection))
  return {"valid": run["history"][run["best_epoch"]]["val_kendall_tau"], "test": float(np.mean(list(taus.values()))),
          "test_per_graph": taus}


def train_and_score(collection: str, extra_flags: list[str], run_dir: pathlib.Path) -> dict:
  """Trains one run; scored_run's figures and the seconds it took."""
  _, source, search = collection.split(":")
  command = [sys.executable, str(locations.REPOSITORY / "baselines/layout_train.py"), f"--source={source}",
             f"--search={search}", f"--experiment={_EXPERIMENT.value}", f"--data_root={pathlib.Path(_DATA_DIR.value) / 'npz'}",
             f"--out_dir={run_dir}", *extra_flags]
  start = time.perf_counter()
  locations.run_with_tree(command, locations.REPOSITORY)
  return {**scored_run(collection, run_dir), "seconds": time.perf_counter() - start}


def previous_default(commit: str, scratch: pathlib.Path) -> dict[str, dict]:
  """{collection: scored_run} of the main job at `commit` on --data_dir (it trains every collection
  at once; the seconds are its whole run divided by its layout collections)."""
  tree = locations.checkout(commit, scratch / "previous")
  out_dir = scratch / "previous_run"
  start = time.perf_counter()
  locations.run_with_tree([sys.executable, str(tree / "baselines/quickstart.py"),
                           f"--data_root={pathlib.Path(_DATA_DIR.value) / 'npz'}", f"--out_dir={out_dir}"], tree)
  seconds = time.perf_counter() - start
  return {collection: {**scored_run(collection, out_dir / "runs" / collection.replace(":", "_")),
                       "seconds": seconds / len(LAYOUT_COLLECTIONS)}
          for collection in _COLLECTIONS.value}


def plot(results: dict[tuple[str, str], dict], collections: list[str], variants: list[str], path: pathlib.Path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  figure, axes = plt.subplots(1, 2, figsize=(4 + 1.6 * len(collections), 3.4), sharey=True)
  width = 0.8 / len(variants)
  for axis, split in zip(axes, ("valid", "test")):
    for i, variant in enumerate(variants):
      axis.bar(np.arange(len(collections)) + i * width, [results[(c, variant)][split] for c in collections], width,
               label=variant)
    axis.set_xticks(np.arange(len(collections)) + width * (len(variants) - 1) / 2,
                    [c.removeprefix("layout:") for c in collections], fontsize=8)
    axis.set_title(f"{split} programs")
    axis.axhline(0, color="black", linewidth=0.5)
  axes[0].set_ylabel("Kendall tau")
  axes[0].legend(fontsize=7)
  figure.tight_layout()
  figure.savefig(path, dpi=110)


def main(argv):
  del argv
  variants = parsed_variants(_VARIANT.value)
  out = pathlib.Path(_OUT.value)
  journal = benchmark_results.working_path(out, ".jsonl")
  # {(collection, variant): result} of this run and of earlier (perhaps killed) ones
  results = {(r["collection"], r["variant"]): r for r in benchmark_results.read_journal(journal)}

  def record(result: dict) -> None:
    results[(result["collection"], result["variant"])] = result
    print(benchmark_results.append_to_journal(journal, result), flush=True)

  with tempfile.TemporaryDirectory(prefix="generated_layout_") as scratch:
    if _PREVIOUS_COMMIT.value:
      if any((collection, PREVIOUS) not in results for collection in _COLLECTIONS.value):
        print(f"{PREVIOUS}: the main job at {_PREVIOUS_COMMIT.value} ...", flush=True)
        for collection, result in previous_default(_PREVIOUS_COMMIT.value, pathlib.Path(scratch)).items():
          if (collection, PREVIOUS) not in results:
            record({"collection": collection, "variant": PREVIOUS, "flags": [f"commit {_PREVIOUS_COMMIT.value}"],
                    **result})
      variants.insert(0, (PREVIOUS, [f"the main job at {_PREVIOUS_COMMIT.value}"]))
    for collection in _COLLECTIONS.value:
      for name, extra in variants:
        if (collection, name) in results:
          continue
        print(f"{collection}, {name}: training ...", flush=True)
        record({"collection": collection, "variant": name, "flags": extra,
                **train_and_score(collection, extra, pathlib.Path(scratch) / f"{collection.replace(':', '_')}_{name}")})
  names = [name for name, _ in variants]
  lines = [f"Experiment `{_EXPERIMENT.value}` per collection, one run each; valid: the kept epoch's mean Kendall tau on "
           "the valid programs; test: mean Kendall tau on the test programs against the hidden labels. Variants: "
           + "; ".join(f"{name}: `{' '.join(extra) or 'no extra flags'}`" for name, extra in variants) + ".", "",
           "| collection | " + " | ".join(f"{name} valid | {name} test" for name in names) + " | seconds per run |",
           "|---|" + "---:|" * (2 * len(names) + 1)]
  for collection in _COLLECTIONS.value:
    cells = [f"{results[(collection, n)]['valid']:.3f} | {results[(collection, n)]['test']:.3f}" for n in names]
    seconds = " / ".join(f"{results[(collection, n)]['seconds']:.0f}" for n in names)
    lines.append(f"| {collection} | " + " | ".join(cells) + f" | {seconds} |")
  path = benchmark_results.write("research/generated_layout", "Layout ranking of unseen generated programs", "\n".join(lines), out)
  plot(results, _COLLECTIONS.value, names, benchmark_results.working_path(path, ".png"))


if __name__ == "__main__":
  program.run(main)
