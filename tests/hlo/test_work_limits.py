"""Bounded work (tpu_graphs/hlo/work_limits.py, native/hlo/work_limits.h): a count of candidates, a
module or candidates' config features beyond a limit are refused in one line before the work is
done, by the Python featurizer and the C++ one (//native:featurize, a fresh process) with the same
words, and the C interface's default limits are the Python ones."""

import pathlib
import re
import subprocess
import sys

import pytest
import tensorflow as tf

import bazel_outputs
import hang_guard
import sample_data
from tpu_graphs.hlo import candidates, from_tensorflow, hlo_input, work_limits

LAYOUT_PB = "pb/official_testdata/module_tuning_data_layout.pb"  # 62 configurable ops
HEADER = pathlib.Path(__file__).resolve().parents[2] / "native" / "library" / "tpu_graphs_model.h"


def _native_featurize(path, tmp_path, *flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([str(bazel_outputs.built("native/tools/featurize")), f"--input={path}",
                         f"--output_dir={tmp_path / 'out'}", *flags],
                        capture_output=True, text=True, timeout=hang_guard.SECONDS)


def test_the_c_interfaces_default_limits_are_the_python_ones():
  defines = dict(re.findall(r"#define TPU_GRAPHS_DEFAULT_(MAX_\w+) (.+)", HEADER.read_text()))
  values = {name: eval(text.replace("INT64_C", ""))  # pylint: disable=eval-used
            for name, text in defines.items()}
  assert values == {"MAX_CANDIDATES": work_limits.MAX_CANDIDATES, "MAX_MODULE_BYTES": work_limits.MAX_MODULE_BYTES,
                    "MAX_CONFIG_BYTES": work_limits.MAX_CONFIG_BYTES}


def test_a_count_beyond_the_limit_is_refused_before_the_file_is_read(tmp_path):
  with pytest.raises(work_limits.WorkLimitError) as refused:
    candidates.candidate_graphs_from_file(tmp_path / "no_such_module.pb", 100_000_000)
  assert str(refused.value) == ("100000000 candidates asked for, more than the limit of 100000 (max_candidates); "
                                "ask for fewer or raise the limit")


def test_a_count_beyond_the_limit_is_refused_alike_by_both_featurizers(tmp_path):
  path = sample_data.require_sample(LAYOUT_PB)
  with pytest.raises(work_limits.WorkLimitError) as refused:
    candidates.candidate_graphs(hlo_input.read_hlo_file(path), 100_001, source=str(path))
  completed = _native_featurize(path, tmp_path, "--num_candidates=100001")
  assert (completed.returncode, completed.stdout) == (1, "")
  assert completed.stderr == f"featurize: {refused.value}\n"


def test_candidates_whose_config_features_pass_the_limit_are_refused_alike_before_they_are_drawn(tmp_path):
  """unet_3d's 62 configurable ops take 4,464 bytes of features per config: 100,000 candidates
  would take 446 MB, more than the 128 MiB default; 1,000 (4.5 MB) are drawn."""
  path = sample_data.require_sample(LAYOUT_PB)
  with pytest.raises(work_limits.WorkLimitError) as refused:
    candidates.candidate_graphs(hlo_input.read_hlo_file(path), 100_000, source=str(path))
  assert str(refused.value) == (f"{path}: 100000 candidates of 1116 config features each would take more than "
                                f"{128 << 20} bytes, the limit (max_config_bytes); ask for fewer candidates or raise "
                                "the limit")
  completed = _native_featurize(path, tmp_path, "--num_candidates=100000")
  assert (completed.returncode, completed.stdout) == (1, "")
  assert completed.stderr == f"featurize: {refused.value}\n"
  [graph] = candidates.candidate_graphs(hlo_input.read_hlo_file(path), 1000, source=str(path))
  assert graph.node_config_feat.shape == (1000, 62, 18)


def test_a_limit_counts_the_configs_there_are_not_the_count_asked_for():
  """A small program with fewer candidate layouts than the most allowed: asked for that many, it
  takes the bytes of the ones it has."""
  module = from_tensorflow.hlo_module(lambda a, b: tf.nn.relu(tf.linalg.matmul(a, b)), tf.TensorSpec([8, 16]),
                                      tf.TensorSpec([16, 4]))
  [graph] = candidates.candidate_graphs(module, work_limits.MAX_CANDIDATES)
  assert graph.num_configs < 1000
  needed = graph.node_config_feat.nbytes
  [again] = candidates.candidate_graphs(module, work_limits.MAX_CANDIDATES,
                                        limits=work_limits.WorkLimits(max_config_bytes=needed))
  assert again.num_configs == graph.num_configs
  with pytest.raises(work_limits.WorkLimitError, match=f"{graph.num_configs} candidates of "):
    candidates.candidate_graphs(module, work_limits.MAX_CANDIDATES,
                                limits=work_limits.WorkLimits(max_config_bytes=needed - 1))


def test_a_module_beyond_the_byte_limit_is_refused_reading_no_further(tmp_path):
  path = sample_data.require_sample(LAYOUT_PB)
  with pytest.raises(work_limits.WorkLimitError) as refused:
    hlo_input.read_hlo_file(path, max_bytes=1000)
  assert str(refused.value) == (f"{path}: holds more than 1000 bytes, the limit of a module (max_module_bytes)")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
