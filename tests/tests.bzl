"""One py_test per test_*.py of a tests/ folder (tests/BUILD says why the tests are laid out so)."""

# What compiling a model library and ranking with it need (tpu_graphs/export/aot/native_library.py,
# //native/tools:rank).
NATIVE_LIBRARY = [
    "//native:featurizer_archive",
    "//native/library:model_library_sources",
    "//native/tools:rank",
    "//native:xla_aot_runtime",
]

def test_modules(end_to_end = [], data = {}):
    """A py_test for every test_*.py in the calling package, found by glob.

    Args:
      end_to_end: the modules that train, export or compile models, or run the programs of
        baselines/ as users do (tens of seconds to minutes each): tagged end_to_end, which
        `scripts/test --quick` leaves out, and sized enormous, so that Bazel's timeout (60 minutes)
        is only a hang guard on a loaded machine. Every other module is a unit test: seconds, size
        large (15 minutes).
      data: {module: [labels]}, what a module reads besides //data.
    """
    modules = native.glob(["test_*.py"])
    for module in end_to_end + list(data):
        if module not in modules:
            fail("%s names %s, which is no test module of this folder" % (native.package_name(), module))
    for module in modules:
        native.py_test(
            name = module[:-len(".py")],
            size = "enormous" if module in end_to_end else "large",
            srcs = [module],
            data = ["//data"] + data.get(module, []),
            main = module,
            tags = ["end_to_end"] if module in end_to_end else [],
            deps = [
                "//tests:test_support",
                "//baselines:programs",
                "//benchmarks:benchmark_results",
                "//benchmarks:untrained",
                "//tpu_graphs",
            ],
        )
