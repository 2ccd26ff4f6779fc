"""Two real worker processes on 127.0.0.1 train one model with MultiWorkerMirroredStrategy.

Each process runs baselines/tiles_train.py with its own TF_CONFIG, exactly as on two machines;
the strategy comes from strategies.choose_strategy, the run from the shared trainer.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import tile_test_data
from tpu_graphs.data import convert
from tpu_graphs.models import tile_model
from tpu_graphs.train import tasks, trainer

PROGRAM = pathlib.Path(__file__).resolve().parents[2] / "baselines" / "tiles_train.py"
TIMEOUT_S = 300  # both workers together; one that dies leaves the other waiting in a collective
SETTINGS = dict(epochs=2, batch_size=4, configs_per_graph=8, learning_rate=3e-3)
UNITS, LAYERS = 16, 1


def _free_ports(count: int) -> list:
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _tf_config(ports: list, index: int) -> str:
  return json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
                     "task": {"type": "worker", "index": index}})


def _checkpoint_tensors(run_dir: pathlib.Path) -> dict:
  reader = tf.train.load_checkpoint(str(run_dir / "checkpoints"))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _losses(run_dir: pathlib.Path) -> list:
  return [epoch["loss"] for epoch in json.loads((run_dir / "history.json").read_text())]


def test_two_workers_end_with_identical_weights_and_follow_a_single_process_run(tmp_path):
  npz_root = tile_test_data.write_tile_tree(tmp_path, {"train": 16, "valid": 4})
  # Converted once beforehand, as tiles_train would (it then finds every shard done): workers
  # sharing a disk would otherwise convert into one directory at once.
  convert.convert_directory(npz_root / "tile", tmp_path / "records", progress=False)
  flags = [f"--data_root={npz_root}", f"--records_dir={tmp_path / 'records'}", f"--out_dir={tmp_path / 'run'}",
           f"--units={UNITS}", f"--layers={LAYERS}", *(f"--{name}={value}" for name, value in SETTINGS.items())]
  ports = _free_ports(2)
  logs = [tmp_path / f"worker_{index}.log" for index in range(2)]
  started = time.monotonic()
  workers = []
  try:
    for index, log in enumerate(logs):
      with open(log, "w") as stream:
        workers.append(subprocess.Popen([sys.executable, str(PROGRAM), *flags], cwd=PROGRAM.parents[1],
                                        env={**os.environ, "TF_CONFIG": _tf_config(ports, index)},
                                        stdout=stream, stderr=subprocess.STDOUT))
    # The single-process reference trains here while the workers start up and train.
    records = tmp_path / "records" / "tile" / "xla"
    reference = trainer.run(
        tasks.TileTask(), lambda spec: tile_model.build_tile_model(spec, "late", "sage", UNITS, LAYERS),
        trainer.TrainingConfig(train_dir=str(records / "train"), valid_dir=str(records / "valid"),
                               out_dir=str(tmp_path / "single"), verbose=0, **SETTINGS),
        strategy=tf.distribute.get_strategy())
    for worker in workers:
      worker.wait(timeout=max(1.0, TIMEOUT_S - (time.monotonic() - started)))
  except subprocess.TimeoutExpired:
    pytest.fail(f"workers still running after {TIMEOUT_S} s; worker 0 log:\n" + logs[0].read_text()[-4000:])
  finally:
    for worker in workers:
      if worker.poll() is None:
        worker.kill()
        worker.wait()
  for worker, log in zip(workers, logs):
    assert worker.returncode == 0, log.read_text()[-4000:]

  chief, other = tmp_path / "run", tmp_path / "run" / "workers" / "1"
  chief_config = json.loads((chief / "config.json").read_text())
  # CollectiveAllReduceStrategy: the class behind tf.distribute.MultiWorkerMirroredStrategy.
  assert chief_config["strategy"] == "CollectiveAllReduceStrategy" and chief_config["replicas"] == 2
  assert json.loads((other / "config.json").read_text())["out_dir"] == str(other)

  chief_state, other_state = _checkpoint_tensors(chief), _checkpoint_tensors(other)
  assert chief_state.keys() == other_state.keys()
  assert any("scorer" in name for name in chief_state)  # model weights, not only the epoch counters
  for name, value in chief_state.items():
    np.testing.assert_array_equal(other_state[name], value, err_msg=name)

  losses = _losses(chief)
  assert losses == _losses(other)
  assert losses[-1] < losses[0]
  # Each worker takes every other batch of the same sequence: the same steps as one process.
  np.testing.assert_allclose(losses, [epoch["loss"] for epoch in reference["history"]], rtol=1e-4)
  reference_state = _checkpoint_tensors(tmp_path / "single")
  for name, value in chief_state.items():
    np.testing.assert_allclose(value, reference_state[name], rtol=1e-4, atol=1e-5, err_msg=name)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
