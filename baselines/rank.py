"""Ranks the configs of a TpuGraphs file or an HLO proto with an exported model; prints the best.

  python baselines/rank.py --model out/tiles/export --input kernel.npz
  python baselines/rank.py --model out/layout/export --input module_tuning_data.pb --top 10 --json best.json
  python baselines/rank.py --model out/tiles/export --input optimized_module.pb --kernels
  python baselines/rank.py --model out/layout/export --input my_model_hlo.pb --num_candidates 100

--model is a serving SavedModel (the export/ folder of a training run, see
tpu_graphs/export/saved_model.py). A .pb input is featurized first (ModuleTuningData, TuningData
or a bare HloModuleProto; --kernels: one tile graph per fusion of an optimized module).
--num_candidates: a bare HloModuleProto's own configs are replaced by candidates, as XLA's
autotuners would try them (tpu_graphs/hlo/candidates.py): up to that many combinations of its
ops' candidate layouts (config 0 the default), or with --kernels each fusion's candidate tile
sizes; config i is candidate i, drawn with --seed. --json
writes [{"id", "collection", "num_configs", "best": [{"config", "score"}]}] per graph; with
--num_candidates each best entry also says what it sets (candidates.describe: "output_tile" and
"kernel_tile", or "layouts" of the nodes it moves from the default).
"""

import json
import pathlib

from absl import flags

from baselines import program
from tpu_graphs.data import storage
from tpu_graphs.export import ranker
from tpu_graphs.hlo import candidates

_MODEL = flags.DEFINE_string("model", None, "A serving SavedModel directory (a run's export/).", required=True)
_INPUT = flags.DEFINE_string("input", None, "A TpuGraphs .npz file or an HLO .pb file.", required=True)
_TOP = flags.DEFINE_integer("top", 5, "How many of the best configs to print and write per graph.")
_JSON = flags.DEFINE_string("json", None, "Also write the best configs of every graph to this JSON file.")
_KERNELS = flags.DEFINE_bool("kernels", False, "For a bare HloModuleProto: rank the tile configs of each fusion.")
_NUM_CANDIDATES = flags.DEFINE_integer(
    "num_candidates", None, "For a bare HloModuleProto: rank up to this many candidate configs (layout "
    "combinations, or with --kernels tile sizes per fusion) instead of the module's own.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the candidates drawn with --num_candidates.")
_CONFIGS_PER_CALL = flags.DEFINE_integer("configs_per_call", ranker.DEFAULT_CONFIGS_PER_CALL,
                                         "Configs scored per model call (bounds memory).")
program.require_at_least(1, _TOP, _CONFIGS_PER_CALL, _NUM_CANDIDATES)


def main(argv):
  del argv
  program.refuse_overwriting_inputs("json", _JSON.value, [_INPUT.value, _MODEL.value])
  model = ranker.Ranker(_MODEL.value, _CONFIGS_PER_CALL.value)
  if _NUM_CANDIDATES.value is None:
    ranked = [(ranking, None) for ranking in model.rank_file(_INPUT.value, kernels=_KERNELS.value)]
  else:
    found = candidates.candidate_graphs_from_file(_INPUT.value, _NUM_CANDIDATES.value, _KERNELS.value, _SEED.value)
    ranked = [(model.rank(graph), graph) for graph in found]
  result = []
  for ranking, graph in ranked:
    best = ranking.best(_TOP.value)
    print(f"{ranking.collection}:{ranking.graph_id}: {ranking.scores.size} configs, best first: "
          + ", ".join(f"{index} ({score:.4g})" for index, score in best))
    result.append({"id": ranking.graph_id, "collection": ranking.collection, "num_configs": int(ranking.scores.size),
                   "best": [{"config": index, "score": score,
                             **(candidates.describe(graph, index) if graph is not None else {})}
                            for index, score in best]})
  if _JSON.value:
    pathlib.Path(_JSON.value).parent.mkdir(parents=True, exist_ok=True)
    with storage.atomic_path(_JSON.value) as temporary:
      temporary.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {_JSON.value}")


if __name__ == "__main__":
  program.run(main)
