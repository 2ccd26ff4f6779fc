// The flags of the native programs (//native:rank, //native:featurize), spelled as the Python
// programs' (absl): --name=value or --name value, --name alone for a boolean, --help (or -h) for
// the usage; paths taken from where `bazel run` was started.
#ifndef TPU_GRAPHS_NATIVE_TOOLS_COMMAND_LINE_H_
#define TPU_GRAPHS_NATIVE_TOOLS_COMMAND_LINE_H_

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace tpu_graphs {

// Bad flags: the program prints its usage and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// --help or -h: the program prints its usage on stdout and exits with status 0.
class HelpRequested : public std::exception {};

// Flag name -> value; the keys are the flags a program knows, their values its defaults (a flag
// whose default is "true" or "false" is a boolean).
using Flags = std::map<std::string, std::string>;

// Sets `flags` from argv: --name=value, --name value, or a boolean's --name alone ("true");
// HelpRequested for --help or -h; UsageError for anything else, a name `flags` lacks or a value
// missing at the end.
void ParseFlags(int argc, char** argv, Flags& flags);

// The integer value of flag `name`, at least `least`; UsageError otherwise.
int64_t IntegerFlag(const Flags& flags, const std::string& name, int64_t least);

// Whether boolean flag `name` is "true"; UsageError for a value other than true or false.
bool BooleanFlag(const Flags& flags, const std::string& name);

// The exit status of a program whose `main` throws: its own status; 0, printing the usage on
// stdout, for HelpRequested; 2, printing "<program>: <what>" and the usage, for a UsageError; 1,
// printing "<program>: <what>" (a Python program's line for the same failure), for anything else.
int RunProgram(const char* program, const char* usage, int (*main)(int, char**), int argc, char** argv);

// A path relative to where `bazel run` was started (the program runs in its runfiles).
std::string FromCallerDirectory(const std::string& path);

// Writes `bytes` to `path` whole or not at all: to "<path>.tmp", then renamed onto `path`, so a
// reader never sees half a file; std::runtime_error naming `path` where it cannot.
void WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_TOOLS_COMMAND_LINE_H_
