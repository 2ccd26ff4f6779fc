"""A run report people read: Markdown with the metric table for every collection, plus PNG plots.

The quickstart (and anyone comparing runs) hands over, per collection, what training left behind:
the epoch history and the validation scores of every config. From those alone the report draws
training curves, predicted against true runtime rank, the tile top-K error curve and Kendall's tau
per layout graph, so a reader sees at a glance whether a model ranks, not just a number.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Mapping, Optional, Sequence

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and CI
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import matplotlib.ticker  # pylint: disable=g-import-not-at-top
import numpy as np

from tpu_graphs.data import storage
from tpu_graphs.train import experiments, metrics

TOP_K_RANGE = tuple(range(1, 11))
# One line per metric the table can show, so that a reader of report.md needs no code to read it
# (tpu_graphs/train/metrics.py computes them). `top_k_slowdown` stands for top1_slowdown, top5_...
METRIC_DEFINITIONS = {
    "top_k_slowdown": "top-K slowdown (`top1_slowdown`, `top5_slowdown`, ...): the best measured runtime "
                      "among the K configs the model ranks fastest over the best runtime of all configs, minus 1; "
                      "0 when the fastest config is among them (lower is better).",
    "tile_score": "`tile_score`: 1 − `top5_slowdown`, the Kaggle tile:xla metric of a kernel (1 is perfect).",
    "opa": "`opa`, ordered pair accuracy: of the pairs of configs with different runtimes, the share whose scores "
           "order them the same way (1 is perfect, 0.5 is chance).",
    "kendall_tau": "`kendall_tau`: Kendall's tau-b between scores and measured runtimes, from -1 (reversed) through "
                   "0 (chance) to 1 (the measured order); its mean over graphs is the Kaggle layout score.",
}
_TOP_K_SLOWDOWN = re.compile(r"top\d+_slowdown")


@dataclasses.dataclass(frozen=True)
class CollectionResult:
  """What one collection's run produced.

  history: one dict per epoch with at least "epoch" and "loss" (and val_<metric> entries).
  scored: "<collection>:<graph id>" -> (runtimes (c,), scores (c,)) over every validation config,
    lower score = predicted faster.
  summary: metric name -> value, the table's row (mean over validation graphs).
  """

  collection: str
  history: Sequence[Mapping[str, float]]
  scored: Mapping[str, tuple[np.ndarray, np.ndarray]]
  summary: Mapping[str, float]


def _rank01(values: np.ndarray) -> np.ndarray:
  """Ranks scaled to [0, 1] (0 = smallest)."""
  order = np.argsort(np.argsort(values, kind="stable"), kind="stable")
  return order / max(1, len(values) - 1)


def _save(figure, path: pathlib.Path) -> str:
  with storage.atomic_path(path) as temporary:
    figure.savefig(temporary, format="png", dpi=110, bbox_inches="tight")
  plt.close(figure)
  return path.name


def _primary_validation_metric(history: Sequence[Mapping[str, float]]) -> Optional[str]:
  keys = history[0] if history else {}
  return next((k for k in ("val_tile_score", "val_kendall_tau") if k in keys), None)


def epoch_numbers(history: Sequence[Mapping[str, float]]) -> list[int]:
  """The epochs of a history as Keras's progress lines number them: from 1 (history.json counts from 0)."""
  return [int(h["epoch"]) + 1 for h in history]


def training_curves_figure(results: Sequence[CollectionResult]):
  """Training loss (top row) and the primary validation metric (bottom row) per epoch, a column per collection."""
  figure, axes = plt.subplots(2, len(results), figsize=(3.2 * len(results), 5), squeeze=False, sharex="col")
  for column, result in enumerate(results):
    epochs = epoch_numbers(result.history)
    axes[0, column].plot(epochs, [h["loss"] for h in result.history], "o-")
    axes[0, column].set_title(result.collection, fontsize=9)
    primary = _primary_validation_metric(result.history)
    if primary:
      axes[1, column].plot(epochs, [h[primary] for h in result.history], "s-", color="tab:orange")
      axes[1, column].set_ylabel(primary, fontsize=8)
    axes[1, column].set_xlabel("epoch")
    axes[1, column].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
  axes[0, 0].set_ylabel("training loss", fontsize=8)
  figure.suptitle("Training loss (top) and validation metric after each epoch (bottom)")
  figure.tight_layout()
  return figure


def plot_training_curves(results: Sequence[CollectionResult], path: pathlib.Path) -> str:
  return _save(training_curves_figure(results), path)


def plot_rank_scatter(results: Sequence[CollectionResult], path: pathlib.Path) -> str:
  figure, axes = plt.subplots(1, len(results), figsize=(3.2 * len(results), 3.2), squeeze=False)
  for axis, result in zip(axes[0], results):
    for runtimes, scores in result.scored.values():
      axis.scatter(_rank01(runtimes), _rank01(scores), s=3, alpha=0.4)
    axis.plot([0, 1], [0, 1], "k--", linewidth=0.8)
    axis.set_title(result.collection, fontsize=9)
    axis.set_xlabel("true runtime rank")
    axis.set_ylabel("predicted rank")
  figure.suptitle("Predicted against true runtime rank, validation configs (one colour per graph)")
  figure.tight_layout()
  return _save(figure, path)


def top_k_error_curve(scored: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> list[float]:
  """Mean top-K slowdown error over the measured graphs (scoring.evaluate leaves the others out) for
  K in TOP_K_RANGE."""
  return [float(np.mean([metrics.top_k_slowdown(r, s, k) for r, s in scored.values() if (r > 0).any()]))
          for k in TOP_K_RANGE]


def plot_top_k_error(result: CollectionResult, path: pathlib.Path) -> str:
  figure, axis = plt.subplots(figsize=(4.5, 3))
  axis.plot(TOP_K_RANGE, top_k_error_curve(result.scored), "o-")
  axis.set_xlabel("K (configs the compiler would try)")
  axis.set_ylabel("mean top-K slowdown error")
  axis.set_title(f"{result.collection}: best of the model's top K vs the true best", fontsize=9)
  return _save(figure, path)


def graph_label(key: str) -> str:
  """A per-graph bar's label, one line: the whole graph id and its collection without the kind
  ("unet_3d.4x4.bf16 (xla:default)" for "layout:xla:default:unet_3d.4x4.bf16")."""
  collection, graph_id = key.rsplit(":", 1)
  return f"{graph_id} ({collection.split(':', 1)[1]})"


def kendall_per_graph_figure(results: Sequence[CollectionResult]):
  """One bar per validation graph, labelled with its whole id; the figure widens with the graphs so
  that labels do not overlap."""
  labels, values = [], []
  for result in results:
    for key, (runtimes, scores) in sorted(result.scored.items()):
      if not (runtimes > 0).any():  # unmeasured: no tau
        continue
      labels.append(graph_label(key))
      values.append(metrics.kendall_tau(runtimes, scores))
  figure, axis = plt.subplots(figsize=(max(7.0, 0.15 * len(values)), 3))
  axis.bar(range(len(values)), values)
  axis.set_xticks(range(len(values)), labels, rotation=90, fontsize=6)
  axis.set_xlim(-0.6, len(values) - 0.4)
  axis.axhline(0, color="k", linewidth=0.8)
  axis.set_ylabel("Kendall's tau")
  axis.set_title("Kendall's tau per validation graph (layout collections)", fontsize=9)
  return figure


def plot_kendall_per_graph(results: Sequence[CollectionResult], path: pathlib.Path) -> str:
  return _save(kendall_per_graph_figure(results), path)


def metric_table(results: Sequence[CollectionResult]) -> str:
  """Markdown table: one row per collection, the union of their metrics as columns."""
  names = []
  for result in results:
    names += [n for n in result.summary if n not in names]
  lines = ["| collection | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
  for result in results:
    cells = [f"{result.summary[n]:.4f}" if n in result.summary else "" for n in names]
    lines.append(f"| {result.collection} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def metric_definitions(names: Sequence[str]) -> str:
  """A Markdown list defining, one line each, the metrics among `names` (the top-K slowdowns once),
  in the order they first appear; an empty string when none is defined."""
  keys = []
  for name in names:
    key = "top_k_slowdown" if _TOP_K_SLOWDOWN.fullmatch(name) else name
    if key in METRIC_DEFINITIONS and key not in keys:
      keys.append(key)
  return "\n".join(f"- {METRIC_DEFINITIONS[key]}" for key in keys)


def write_report(results: Sequence[CollectionResult], out_dir, title: str = "tpu_graphs run report",
                 preamble: Optional[str] = None) -> pathlib.Path:
  """Writes report.md and its plots into out_dir; returns the Markdown file's path."""
  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  # Tasks that submit their top configs (tile) get a top-K error curve, tasks that rank every config
  # (layout) Kendall's tau per graph.
  submits_top = {r.collection: experiments.task_class(r.collection).submission_length is not None for r in results}
  tile = [r for r in results if submits_top[r.collection]]
  layout = [r for r in results if not submits_top[r.collection]]
  definitions = metric_definitions([name for result in results for name in result.summary])
  sections = [f"# {title}", preamble or "", "## Validation metrics", metric_table(results),
              definitions and f"Each value is the mean over the collection's validation graphs.\n\n{definitions}",
              "## Training", f"![training curves]({plot_training_curves(results, out_dir / 'training_curves.png')})",
              "## Predicted against true rank",
              f"![rank scatter]({plot_rank_scatter(results, out_dir / 'rank_scatter.png')})"]
  for result in tile:
    curve = top_k_error_curve(result.scored)
    sections += ["## Tile top-K error",
                 "| K | " + " | ".join(map(str, TOP_K_RANGE)) + " |\n|---|" + "---:|" * len(TOP_K_RANGE) +
                 "\n| error | " + " | ".join(f"{e:.4f}" for e in curve) + " |",
                 f"![top-K error]({plot_top_k_error(result, out_dir / 'tile_top_k_error.png')})"]
  if layout:
    sections += ["## Kendall's tau per graph",
                 f"![kendall per graph]({plot_kendall_per_graph(layout, out_dir / 'kendall_per_graph.png')})"]
  path = out_dir / "report.md"
  with storage.atomic_path(path) as temporary:
    temporary.write_text("\n\n".join(s for s in sections if s) + "\n")
  return path
