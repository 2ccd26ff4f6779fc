"""Named experiments: every collection resolves to its kind's task and settings; the layout recipe
keeps its values; overrides replace only what they name."""

import dataclasses
import sys

import pytest

from tpu_graphs.data import errors, graphs, records
from tpu_graphs.models import layout_model, layout_preprocessing
from tpu_graphs.train import experiments, tasks


def test_layout_recipe_is_the_layout_default():
  recipe = experiments.experiment("layout", "layout:nlp:random")
  assert recipe.training == {"epochs": 10, "steps_per_epoch": 150, "batch_size": 4, "configs_per_graph": 128,
                             "learning_rate": 1e-3, "learning_rate_schedule": "cosine", "warmup_steps": 100,
                             "weight_average": 0.993, "loss": "pairwise_hinge:1", "patience": 10, "eval_batch_size": 1}
  assert recipe.model == experiments.LayoutSettings(
      units=64, layers=1, backbone="residual_gcn", prune_hops=0, dedup=True, normalize=True, segment_size=None,
      graph_norm=True, graph_norm_scale=True, context_layers=3, config_units=32,
      config_encodings=layout_model.CONFIG_ENCODINGS, configs_per_chunk=256)


@pytest.mark.parametrize("collection", [c for c in graphs.COLLECTIONS if c.startswith("layout:")])
def test_main_jobs_layout_runs_are_the_recipe_cut_to_four_epochs(collection):
  main_job, recipe = (experiments.experiment(name, collection) for name in ("quickstart", "layout"))
  assert main_job.model == recipe.model
  assert main_job.training == dict(recipe.training, epochs=4, warmup_steps=40)


@pytest.mark.parametrize("scale", [True, False])
def test_the_layout_model_builds_the_graph_norm_it_names(scale):
  settings = experiments.LayoutSettings(normalize=False, graph_norm_scale=scale)
  spec = records.graph_spec("layout").relax(num_components=True, num_nodes=True, num_edges=True)
  model = settings.model_builder(experiments.DataDerived())(spec)
  norms = [layer for layer in model.submodules if isinstance(layer, layout_model.GraphNorm)]
  assert len(norms) == settings.layers and all(norm.scale == scale for norm in norms)


@pytest.mark.parametrize("name", ["quickstart", "smallest"])
@pytest.mark.parametrize("collection", graphs.COLLECTIONS)
def test_every_collection_gets_its_kinds_task_and_settings(name, collection):
  experiment = experiments.experiment(name, collection)
  task = experiment.task()
  assert isinstance(task, experiments.task_class(collection))
  assert task.kind == graphs.collection_kind(collection)
  assert experiment.training["epochs"] >= 1 and experiment.training["eval_batch_size"] >= 1


def test_tile_program_default_is_the_tile_trainer_default():
  experiment = experiments.experiment("tile", "tile:xla")
  assert experiment.model == experiments.TileSettings(units=64, layers=3, backbone="sage", join="late",
                                                   configs_per_chunk=records.DEFAULT_CONFIGS_PER_CHUNK)
  assert isinstance(experiment.task(), tasks.TileTask) and experiment.training["batch_size"] == 8


def test_layout_task_prunes_as_its_settings_say():
  experiment = experiments.experiment("layout", "layout:xla:default").overridden(model={"prune_hops": 2})
  assert experiment.task().structure_transform == layout_preprocessing.Pruning(2)


def test_overrides_replace_only_what_they_name():
  recipe = experiments.experiment("layout", "layout:xla:default")
  changed = recipe.overridden(training={"epochs": 3}, model={"units": 16})
  assert changed.training == {**recipe.training, "epochs": 3}
  assert changed.model.units == 16 and changed.model.dedup and changed.model.backbone == "residual_gcn"
  assert recipe.training["epochs"] == 10 and recipe.model.units == 64


def test_no_pruning_is_none_in_the_settings_and_minus_one_on_the_flag():
  assert experiments.from_flag_value(experiments.LayoutSettings, "prune_hops", -1) is None
  assert experiments.from_flag_value(experiments.LayoutSettings, "prune_hops", 0) == 0
  assert experiments.flag_value(experiments.LayoutSettings, "prune_hops", None) == -1
  assert experiments.from_flag_value(experiments.LayoutSettings, "config_encodings", ["costs"]) == ("costs",)


def test_an_override_the_kind_does_not_have_is_refused():
  with pytest.raises(TypeError, match="join"):
    experiments.experiment("layout", "layout:xla:default").overridden(model={"join": "early"})


def test_a_collections_own_entry_wins_over_its_kinds(monkeypatch):
  monkeypatch.setitem(experiments.EXPERIMENTS, "nlp_random_apart", {
      "layout": (experiments.LAYOUT_TRAINING, experiments.LayoutSettings()),
      "layout:nlp:random": (dict(experiments.LAYOUT_TRAINING, epochs=2), experiments.LayoutSettings(units=8))})
  apart = experiments.experiment("nlp_random_apart", "layout:nlp:random")
  assert apart.training["epochs"] == 2 and apart.model.units == 8
  assert experiments.experiment("nlp_random_apart", "layout:xla:random").model.units == 64


def test_unknown_names_and_kinds_without_settings_are_refused():
  with pytest.raises(errors.InputError, match=r"unknown experiment 'tiny'; known: tile, layout, quickstart, smallest"):
    experiments.experiment("tiny", "tile:xla")
  with pytest.raises(errors.InputError, match=r"experiment 'tile' has no settings for layout:nlp:default; pick one of "
                                              r"layout, quickstart, smallest"):
    experiments.experiment("tile", "layout:nlp:default")


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
