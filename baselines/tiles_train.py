"""Trains a tile:xla ranking model and writes a run directory (see tpu_graphs/train/trainer.py).

  python baselines/tiles_train.py --out_dir out/tiles --epochs 10
  python baselines/tiles_train.py --experiment smallest --out_dir /tmp/tiles
  python baselines/tiles_train.py --data_root <TpuGraphs>/npz --out_dir out/tiles_real --tpu local
  python baselines/tiles_train.py --jit_compile --epochs 1   # the TPU path (padding, XLA) on this machine
  bazel run //baselines:tiles_train -- --out_dir ...
  TF_CONFIG='{"cluster": {"worker": ["host0:2222", "host1:2222"]}, "task": {"type": "worker", "index": 0}}' \
    python baselines/tiles_train.py --out_dir out/tiles   # on host0; "index": 1 on host1

The run starts from the named experiment --experiment (default "tile", see
tpu_graphs/train/experiments.py); the flags override its settings (--help lists them, those shared
with layout_train.py included). The npz tree under --data_root is converted to records first (into --records_dir, default
<out_dir>/records; finished shards are reused). Rerunning with the same --out_dir resumes a killed
run from its last epoch. The run directory gets config.json, metrics.json (validation metrics,
per kernel), predictions.csv (test split, `ID,TopConfigs`), export/ (the serving SavedModel)
and TensorBoard logs/. With
TF_CONFIG naming several workers, every worker runs this same command (MultiWorkerMirroredStrategy)
and non-chief workers write their copy under <out_dir>/workers/<index>/.
"""

from absl import flags

from baselines import program
from baselines import training_flags
from tpu_graphs.train import experiments

_OUT_DIR = flags.DEFINE_string("out_dir", "out/tiles", "The run directory.")
# One flag per model setting (experiments.TileSettings): --units, --layers, --backbone, --join, ...
MODEL_FLAGS = training_flags.model_flags(experiments.TileSettings)
# --help lists the shared training flags (--data_root, --epochs, --batch_size, --seed, ...) and the
# model's beside this program's own; TensorFlow's stay in --helpfull. After model_flags, which
# defines the model's in training_flags.
flags.adopt_module_key_flags(training_flags)


def main(argv):
  del argv
  training_flags.train("tile:xla", "tile", _OUT_DIR.value,
                       model=training_flags.model_overrides(experiments.TileSettings, MODEL_FLAGS))


if __name__ == "__main__":
  program.run(main, rerun=training_flags.RERUN)
