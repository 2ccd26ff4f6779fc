#include "native/tools/command_line.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tpu_graphs {

void ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--help" || argument == "-h") throw HelpRequested();
    const size_t equals = argument.find('=');
    const std::string name = argument.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    if (argument.rfind("--", 0) != 0 || !flags.count(name)) throw UsageError("unknown argument '" + argument + "'");
    const bool boolean = flags[name] == "true" || flags[name] == "false";
    if (equals != std::string::npos) {
      flags[name] = argument.substr(equals + 1);
    } else if (boolean) {
      flags[name] = "true";
    } else if (i + 1 < argc) {
      flags[name] = argv[++i];
    } else {
      throw UsageError("--" + name + " needs a value (--" + name + "=<value> or --" + name + " <value>)");
    }
  }
}

int64_t IntegerFlag(const Flags& flags, const std::string& name, int64_t least) {
  const std::string& text = flags.at(name);
  int64_t value = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), value).ptr != text.data() + text.size() ||
      text.empty() || value < least) {
    throw UsageError("--" + name + " must be an integer >= " + std::to_string(least));
  }
  return value;
}

bool BooleanFlag(const Flags& flags, const std::string& name) {
  const std::string& text = flags.at(name);
  if (text != "true" && text != "false") throw UsageError("--" + name + " must be true or false");
  return text == "true";
}

int RunProgram(const char* program, const char* usage, int (*main)(int, char**), int argc, char** argv) {
  try {
    return main(argc, argv);
  } catch (const HelpRequested&) {
    std::printf("usage: %s\n", usage);
    return 0;
  } catch (const UsageError& error) {
    std::fprintf(stderr, "%s: %s\nusage: %s\n", program, error.what(), usage);
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program, error.what());
    return 1;
  }
}

std::string FromCallerDirectory(const std::string& path) {
  const char* caller = std::getenv("BUILD_WORKING_DIRECTORY");
  return path.empty() || path[0] == '/' || caller == nullptr ? path : std::string(caller) + "/" + path;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    file.close();
    if (!file) {
      std::remove(temporary.c_str());
      throw std::runtime_error(path + ": cannot write the file (" + std::strerror(errno) + ")");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": cannot write the file (" + reason + ")");
  }
}

}  // namespace tpu_graphs
