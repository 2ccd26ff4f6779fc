"""What tpu_graphs/export/aot/native_library.py compiles into each model library, by the kind of model,
and the headers they include: one list, which this folder's BUILD gives Bazel
(model_library_sources) and native_library.py reads as a Python literal (keep it one)."""

MODEL_LIBRARY_SOURCES = {
    "tile": ["tile_library.cc"],
    "layout": [
        "layout_library.cc",
        "layout_pruning.cc",
        "neighbour_tables.cc",
    ],
}

MODEL_LIBRARY_HEADERS = [
    "layout_pruning.h",
    "library_checks.h",
    "gain_calibration.h",
    "library_threads.h",
    "neighbour_tables.h",
    "rank_module.h",
    "tpu_graphs_model.h",
]
