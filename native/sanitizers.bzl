"""Compiler flags of the sanitized builds of the native code, by the suffix of the targets built
with them: "" the plain build; "_asan" AddressSanitizer and UndefinedBehaviorSanitizer, every
report fatal (the fuzz targets' regression tests, native/fuzz/BUILD); "_tsan" ThreadSanitizer
(tests/native/test_native.py's thread test). Sanitized targets are tagged manual: built only for the
tests that ask for them."""

SANITIZED = {
    "": [],
    "_asan": [
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ],
    "_tsan": ["-fsanitize=thread"],
}

def sanitized_tags(suffix):
    return ["manual"] if suffix else []

def sanitized_cc_library(name, copts = [], linkopts = [], deps = [], sanitized_deps = [], **kwargs):
    """One cc_library per build of SANITIZED: `name` plain and name + suffix with the sanitizer's
    flags, each depending on the same build (suffix) of `sanitized_deps` and on `deps` as they are."""
    for suffix, sanitizer in SANITIZED.items():
        native.cc_library(
            name = name + suffix,
            copts = copts + sanitizer,
            linkopts = linkopts + sanitizer,
            deps = deps + [dep + suffix for dep in sanitized_deps],
            tags = sanitized_tags(suffix),
            **kwargs
        )
