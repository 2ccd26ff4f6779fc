"""Ranks the configs of a TpuGraphs file or an HLO proto with an exported model; prints the best,
each with what it sets.

  python baselines/rank.py --model out/tiles/export --input kernel.npz
  python baselines/rank.py --model out/layout/export --input module_tuning_data.pb --top 10 --json best.json
  python baselines/rank.py --model out/tiles/export --input optimized_module.pb --kernels
  python baselines/rank.py --model out/layout/export --input my_model_hlo.pb --num_candidates 100
  python baselines/rank.py --model out/layout/export --input my_model_hlo.pb --num_candidates 100 --write_module best.pb

--model is a serving SavedModel (the export/ folder of a training run, see
tpu_graphs/export/saved_model.py). A .pb input is featurized first: a ModuleTuningData, a
TuningData, a bare HloModuleProto or an HloProto (XLA's --xla_dump_hlo_as_proto, *.hlo.pb);
--kernels: one tile graph per fusion of an optimized module.
--num_candidates: instead of the configs the input holds (a module's own, a tuning data's
measured runs; tuning data without runs holds none), up to that many configs as XLA's autotuners
would try them (tpu_graphs/hlo/candidates.py): combinations of the program's ops' candidate
layouts (config 0 the default), or with --kernels each fusion's candidate tile sizes; config i is
candidate i, drawn with --seed. //native:rank --hlo ranks the same candidates without Python.
Candidates keep the layouts of the entry computation's parameters and result, which its caller
fixes, and of layout-constrained custom calls (tpu_graphs/hlo/layout_changes.py);
--change_entry_layouts lets them change the entry's.
--max_candidates, --max_module_bytes, --max_config_bytes bound the work (tpu_graphs/hlo/work_limits.py):
beyond them the input is refused in one line before anything large is allocated.
--write_module: the input module written back with its best candidate layout config applied
(tpu_graphs/hlo/module_writer.py: the listed minor-most dims completed to a full minor_to_major
order, an operand read in another layout than its producer's through an inserted copy), in the
wrapper it came in (an HloModuleProto, an HloProto; tuning data gives its module); needs
--num_candidates, and refuses --kernels (a module carries no tile sizes). //native:rank
--write_module writes the same bytes.

Each best config is printed with what it sets (tpu_graphs/hlo/descriptions.py): the output and
kernel tile sizes, or the layouts of the instructions it moves from the module's own, by
instruction name. --json writes [{"id", "collection", "num_configs", "layouts_meaning" (layout),
"best": [{"config", "score", "output_tile", "kernel_tile"} or {"config", "score", "layouts":
{instruction: {"result": {"dims": [dims], "change": kind}, "operand 0": {...}, ...}}}]}] per graph;
"layouts_meaning" says how to read the layouts (the listed dims minor-most, the others free; the
kind of change: internal, entry parameter, entry result, custom call). Best configs that set the
same and score the same are one config the input holds more than once (tuning data that measured
it again): one line names them. A module another backend (CPU, GPU) compiled gets a line, and
"backend_note", saying the model was trained on TPU measurements (tpu_graphs/hlo/module_origin.py).

Predicted gain (tpu_graphs/train/calibration.py): each best config is printed with its predicted
runtime relative to config 0 ("0.83x": 17% faster) and the interval that held 80% of the
run's validation pairs, and each graph with the rank of config 0 among its configs. Config 0 is a
module's own configuration (candidate 0), or, for an npz file or tuning data of measured runs, its
first config, which the output names as the reference. --json adds "reference", "reference_rank"
per graph and "predicted_ratio", "ratio_low", "ratio_high" per best config; an export without a
calibration (no measured validation runtimes) gets "predicted_ratio_note" saying so instead.
"""

import json
import pathlib
import sys
from typing import Optional

from baselines import program
from tpu_graphs.hlo import work_limits


def refuse_too_many_candidates(argv: list[str]) -> None:
  """Ends the program with one line where --num_candidates is above --max_candidates, before
  TensorFlow loads (seconds), as the flags' own check in main() would later."""
  try:
    asked = int(program.flag_text(argv, ["num_candidates"]) or 0)
    limit = int(program.flag_text(argv, ["max_candidates"]) or work_limits.MAX_CANDIDATES)
  except ValueError:
    return  # absl reports the bad value
  try:
    work_limits.check_candidate_count(asked, work_limits.WorkLimits(max_candidates=limit))
  except work_limits.WorkLimitError as error:
    sys.exit(f"{pathlib.Path(sys.argv[0]).stem}: {error}")


if __name__ == "__main__":
  refuse_too_many_candidates(sys.argv[1:])

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags
import numpy as np

from tpu_graphs.data import errors, graphs, npz, storage
from tpu_graphs.export import ranker
from tpu_graphs.hlo import candidates, hlo_input
from tpu_graphs.hlo import descriptions
from tpu_graphs.hlo import featurize
from tpu_graphs.hlo import module_origin
from tpu_graphs.hlo import module_writer
from tpu_graphs.hlo import tuning_pb2
from tpu_graphs.train import calibration

_MODEL = flags.DEFINE_string("model", None, "A serving SavedModel directory (a run's export/).", required=True)
_INPUT = flags.DEFINE_string("input", None, "A TpuGraphs .npz file or an HLO .pb file.", required=True)
_TOP = flags.DEFINE_integer("top", 5, "How many of the best configs to print and write per graph.")
_JSON = flags.DEFINE_string("json", None, "Also write the best configs of every graph to this JSON file.")
_KERNELS = flags.DEFINE_bool("kernels", False, "For an HLO module: rank the tile configs of each fusion.")
_NUM_CANDIDATES = flags.DEFINE_integer(
    "num_candidates", None, "For an HLO module or tuning data: rank up to this many candidate configs (layout "
    "combinations, or with --kernels tile sizes per fusion) instead of the ones it holds.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the candidates drawn with --num_candidates.")
_CHANGE_ENTRY_LAYOUTS = flags.DEFINE_bool(
    "change_entry_layouts", False, "Candidates may change the layouts of the entry computation's parameters and "
    "result (the caller owns the entry computation layout); by default they keep them.")
_CONFIGS_PER_CALL = flags.DEFINE_integer("configs_per_call", ranker.DEFAULT_CONFIGS_PER_CALL,
                                         "Configs scored per model call (bounds memory).")
_MAX_CANDIDATES = flags.DEFINE_integer("max_candidates", work_limits.MAX_CANDIDATES,
                                       "The most candidates --num_candidates may ask for (bounds the work).")
_MAX_MODULE_BYTES = flags.DEFINE_integer("max_module_bytes", work_limits.MAX_MODULE_BYTES,
                                         "The largest .pb input read, in bytes.")
_MAX_CONFIG_BYTES = flags.DEFINE_integer("max_config_bytes", work_limits.MAX_CONFIG_BYTES,
                                         "The most bytes of config features one graph's candidates may take.")
_WRITE_MODULE = flags.DEFINE_string(
    "write_module", None, "Also write the input module with its best candidate layout config applied to this .pb file "
    "(needs --num_candidates; not with --kernels).")
program.require_at_least(1, _TOP, _CONFIGS_PER_CALL, _NUM_CANDIDATES, _MAX_CANDIDATES, _MAX_MODULE_BYTES,
                         _MAX_CONFIG_BYTES)
program.require_at_least(0, _SEED)


# What a user who ranked a module's own single config most likely wanted (//native:rank prints it too).
ONE_CONFIG_HINT = ("one config to rank: the input holds only its own; --num_candidates N ranks N candidate configs "
                   "drawn as XLA's autotuners would try them")


def _work_limits() -> work_limits.WorkLimits:
  return work_limits.WorkLimits(_MAX_CANDIDATES.value, _MAX_MODULE_BYTES.value, _MAX_CONFIG_BYTES.value)


def graphs_to_rank(path: str) -> tuple[list[graphs.Graph], list, Optional[str]]:
  """The graphs of --input with their configs; per graph the configurable instructions its
  descriptions name (None: tile graphs, and npz files, which name no instructions); the line
  saying the model was trained on TPU measurements for a module another backend compiled, or None
  (module_origin.py)."""
  if path.endswith(".npz"):
    if _NUM_CANDIDATES.value is not None or _KERNELS.value:
      raise graphs.GraphFileError(path, "an npz file carries its graph and configs; --kernels and --num_candidates "
                                  "are for an HLO module (.pb)")
    return [npz.read_graph(path, stream_configs=True)], [None], None
  limits = _work_limits()
  proto = hlo_input.read_hlo_file(path, limits.max_module_bytes)
  if _NUM_CANDIDATES.value is None:
    found = featurize.graphs_of_proto(proto, _KERNELS.value, path)
    for graph in found:
      if not graph.num_configs:
        raise graphs.GraphFileError(path, f"{graph.graph_id} has no configs to rank: nothing was measured yet "
                                    "(tuning data without runs); rank its candidates instead (--num_candidates)")
  else:
    found = candidates.candidate_graphs(proto, _NUM_CANDIDATES.value, _KERNELS.value, _SEED.value, path, limits,
                                        _CHANGE_ENTRY_LAYOUTS.value)
  module = proto.module if isinstance(proto, tuning_pb2.ModuleTuningData) else proto
  configurables = [descriptions.configurable_tensors(module, graph.node_config_ids)
                   if isinstance(graph, graphs.LayoutGraph) else None for graph in found]
  return found, configurables, module_origin.backend_note(proto)


def described(graph: graphs.Graph, configs: list[int], configurable) -> list[dict]:
  """What each of `configs` sets (descriptions.py); an npz file's config features, left on disk,
  are read once more in chunks for the rows asked."""
  tile = isinstance(graph, graphs.TileGraph)
  held = graph.config_feat if tile else graph.node_config_feat
  if isinstance(held, np.ndarray):
    rows = {config: held[config] for config in configs}
  else:
    rows, start = {}, 0
    for chunk in held.iter_chunks(_CONFIGS_PER_CALL.value):
      rows.update({config: chunk[config - start] for config in configs if start <= config < start + len(chunk)})
      start += len(chunk)
  return [descriptions.describe_tile_config(rows[config]) if tile else
          descriptions.describe_layout_config(rows[config], graph.node_config_ids, configurable) for config in configs]


def repeated_configs(best: list[tuple[int, float, dict]]) -> list[list[int]]:
  """Of the best configs [(config, score, what it sets)], the groups of two or more that set the
  same and show the same score, in the order listed (//native:rank's RepeatedConfigs)."""
  groups = {}
  for index, score, sets in best:
    groups.setdefault((f"{score:.4g}", json.dumps(sets)), []).append(index)
  return [configs for configs in groups.values() if len(configs) > 1]


def refuse_writing_module_of(path: str) -> None:
  """Raises InputError, before the model loads, where --write_module cannot write the input back:
  an npz file (no module), tile configs (a module carries none), or no candidates drawn."""
  if not _WRITE_MODULE.value:
    return
  program.refuse_overwriting_inputs("write_module", _WRITE_MODULE.value, [path, _MODEL.value])
  if path.endswith(".npz"):
    raise errors.InputError(module_writer.NEEDS_A_MODULE)
  if _KERNELS.value:
    raise errors.InputError(f"--kernels with --write_module: {module_writer.TILE_SIZES_NOT_WRITTEN}")
  if _NUM_CANDIDATES.value is None:
    raise errors.InputError(module_writer.NEEDS_CANDIDATES)


def write_module(path: str, config: int) -> None:
  """--write_module: the input with candidate `config` applied (module_writer.written_module)."""
  limits = _work_limits()
  written, copies = module_writer.written_module(hlo_input.read_hlo_bytes(path, limits.max_module_bytes), path,
                                                 _NUM_CANDIDATES.value, _SEED.value, config, limits,
                                                 _CHANGE_ENTRY_LAYOUTS.value)
  storage.makedirs(storage.parent(_WRITE_MODULE.value) or ".")
  storage.write_bytes(_WRITE_MODULE.value, written)
  print(module_writer.written_line(_WRITE_MODULE.value, config, copies))


def reference_name(path: str, with_candidates: bool) -> str:
  """What config 0, the reference of the predicted ratios, is for this input."""
  if with_candidates:
    return "candidate 0, the module's own configuration"
  if path.endswith(".npz"):
    return "config 0 of the file (its first measured config, which need not be the module's own)"
  return "config 0 of the input (a module's own, or a tuning data's first measured run)"


def gain_lines(ranking: ranker.Ranking, configs: list[int]) -> tuple[list[str], dict, list[dict]]:
  """The predicted gain of the best `configs` against config 0 (calibration.py): the text after each
  config's line ("" each without a calibration), the graph's JSON fields and each config's."""
  ratios = ranking.predicted_ratios(configs)
  rank_of_reference = {"reference_rank": ranking.reference_rank()}
  if ratios is None:
    return [""] * len(configs), {**rank_of_reference, "predicted_ratio_note": calibration.NO_CALIBRATION}, [
        {} for _ in configs]
  return ([f"; predicted {ratio:.3g}x config 0's runtime ({calibration.COVERAGE:.0%} interval {low:.3g}-{high:.3g})"
           for ratio, low, high in ratios], rank_of_reference,
          [{"predicted_ratio": ratio, "ratio_low": low, "ratio_high": high} for ratio, low, high in ratios])


def main(argv):
  del argv
  program.refuse_overwriting_inputs("json", _JSON.value, [_INPUT.value, _MODEL.value])
  refuse_writing_module_of(_INPUT.value)
  if _NUM_CANDIDATES.value is not None:
    work_limits.check_candidate_count(_NUM_CANDIDATES.value, _work_limits())  # before the model loads
  model = ranker.Ranker(_MODEL.value, _CONFIGS_PER_CALL.value)
  found, configurables, backend_note = graphs_to_rank(_INPUT.value)
  if backend_note:
    print(backend_note)
  note = {"backend_note": backend_note} if backend_note else {}
  result = []
  for graph, configurable in zip(found, configurables):
    ranking = model.rank(graph)
    top = ranking.best(_TOP.value)
    sets_of_top = described(graph, [index for index, _ in top], configurable)
    best = [(index, score, sets) for (index, score), sets in zip(top, sets_of_top)]
    print(f"{ranking.collection}:{ranking.graph_id}: {ranking.scores.size} configs, best first: "
          + ", ".join(f"{index} ({score:.4g})" for index, score, _ in best))
    gains, graph_gain, config_gains = gain_lines(ranking, [index for index, _, _ in best])
    reference = reference_name(_INPUT.value, _NUM_CANDIDATES.value is not None)
    print(f"  config 0, {reference}, ranks {graph_gain['reference_rank']} of {ranking.scores.size}"
          + (f"; {calibration.NO_CALIBRATION}" if "predicted_ratio_note" in graph_gain else ""))
    for (index, score, sets), gain in zip(best, gains):
      print(f"  config {index} ({score:.4g}): {descriptions.summary(sets)}{gain}")
    for configs in repeated_configs(best):
      print(f"  configs {', '.join(map(str, configs))} set the same and score the same: one config, listed "
            f"{len(configs)} times")
    meaning = {"layouts_meaning": descriptions.LAYOUTS_MEANING} if isinstance(graph, graphs.LayoutGraph) else {}
    result.append({"id": ranking.graph_id, "collection": ranking.collection, "num_configs": int(ranking.scores.size),
                   **meaning, **note, "reference": reference, **graph_gain,
                   "best": [{"config": index, "score": score, **sets, **gain}
                            for (index, score, sets), gain in zip(best, config_gains)]})
  if (found and not _INPUT.value.endswith(".npz") and _NUM_CANDIDATES.value is None
      and all(graph.num_configs == 1 for graph in found)):
    print(ONE_CONFIG_HINT)
  if _WRITE_MODULE.value:
    write_module(_INPUT.value, result[0]["best"][0]["config"])
  if _JSON.value:
    pathlib.Path(_JSON.value).parent.mkdir(parents=True, exist_ok=True)
    with storage.atomic_path(_JSON.value) as temporary:
      temporary.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {_JSON.value}")


if __name__ == "__main__":
  program.run(main)
