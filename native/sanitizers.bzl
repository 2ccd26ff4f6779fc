"""Compiler flags of the sanitized builds of the native code, by the suffix of the targets built
with them: "" the plain build; "_asan" AddressSanitizer and UndefinedBehaviorSanitizer, every
report fatal (the fuzz targets' regression tests, native/fuzz/BUILD); "_tsan" ThreadSanitizer
(tests/test_native.py's thread test). Sanitized targets are tagged manual: built only for the
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
