#include "native/hlo/module_check.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "native/hlo/hlo_error.h"

namespace tpu_graphs {
namespace {

// Keys in the order first seen, each with the keys it depends on (a later entry of a key replaces
// its dependencies, as a Python dict does).
struct Dependencies {
  std::vector<int64_t> keys;
  std::unordered_map<int64_t, std::vector<int64_t>> after;

  void Set(int64_t key, std::vector<int64_t> dependencies) {
    if (after.count(key) == 0) keys.push_back(key);
    after[key] = std::move(dependencies);
  }
};

// A key on or behind a cycle of `dependencies`, or none (module_check._first_in_cycle): Kahn's
// algorithm drops what depends on nothing left; from the first key that cannot be dropped, the
// walk along dependencies that cannot be dropped either reaches a key twice: it is on the cycle.
std::optional<int64_t> FirstInCycle(const Dependencies& dependencies) {
  std::unordered_map<int64_t, int64_t> waiting;
  std::unordered_map<int64_t, std::vector<int64_t>> dependents;
  for (const int64_t key : dependencies.keys) {
    const auto& after = dependencies.after.at(key);
    const std::unordered_set<int64_t> distinct(after.begin(), after.end());
    waiting[key] = static_cast<int64_t>(distinct.size());
    for (const int64_t other : distinct) dependents[other].push_back(key);
  }
  std::vector<int64_t> ready;
  for (const int64_t key : dependencies.keys) {
    if (waiting[key] == 0) ready.push_back(key);
  }
  while (!ready.empty()) {
    const int64_t key = ready.back();
    ready.pop_back();
    for (const int64_t dependent : dependents[key]) {
      if (--waiting[dependent] == 0) ready.push_back(dependent);
    }
  }
  auto stuck = [&](int64_t key) {
    const auto found = waiting.find(key);
    return found != waiting.end() && found->second > 0;
  };
  std::optional<int64_t> key;
  for (const int64_t candidate : dependencies.keys) {
    if (stuck(candidate)) {
      key = candidate;
      break;
    }
  }
  if (!key) return std::nullopt;
  std::unordered_set<int64_t> seen;
  while (seen.insert(*key).second) {
    for (const int64_t other : dependencies.after.at(*key)) {
      if (stuck(other)) {
        key = other;
        break;
      }
    }
  }
  return key;
}

std::string IntegerList(const google::protobuf::RepeatedField<int64_t>& values) {
  std::string text = "[";
  for (int i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

// Why a shape (or an element of a tuple shape) is not a shape, or "".
std::string ShapeProblem(const xla::ShapeProto& shape) {
  for (const int64_t size : shape.dimensions()) {
    if (size < 0) return "has a negative dimension in its shape " + IntegerList(shape.dimensions());
  }
  for (const xla::ShapeProto& element : shape.tuple_shapes()) {
    std::string problem = ShapeProblem(element);
    if (!problem.empty()) return problem;
  }
  return "";
}

}  // namespace

void CheckModule(const xla::HloModuleProto& module, const std::string& source) {
  const std::string module_name = Quoted(module.name());
  auto refuse = [&](const std::string& problem) {
    const bool named = source.find(module_name) != std::string::npos;
    throw HloError(source, named ? problem : "module " + module_name + ": " + problem);
  };
  bool has_instructions = false;
  std::unordered_map<int64_t, const xla::HloComputationProto*> computations;
  for (const xla::HloComputationProto& computation : module.computations()) {
    has_instructions = has_instructions || computation.instructions_size() > 0;
    computations[computation.id()] = &computation;
  }
  if (!has_instructions) refuse("the module has no instructions");
  if (computations.count(module.entry_computation_id()) == 0) {  // XLA finds the entry by id alone, and refuses it
    refuse("has no entry computation (entry_computation_id " + std::to_string(module.entry_computation_id()) +
           " names none of its " + std::to_string(computations.size()) + " computations, as XLA requires)");
  }
  std::unordered_map<int64_t, int64_t> computation_of;
  for (const xla::HloComputationProto& computation : module.computations()) {
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      if (!computation_of.emplace(instruction.id(), computation.id()).second) {
        refuse("instruction id " + std::to_string(instruction.id()) + " (" + Quoted(instruction.name()) +
               ") appears twice");
      }
    }
  }
  auto computation_holding = [&](int64_t instruction_id) -> std::optional<int64_t> {
    const auto found = computation_of.find(instruction_id);
    return found == computation_of.end() ? std::nullopt : std::optional<int64_t>(found->second);
  };
  for (const xla::HloComputationProto& computation : module.computations()) {
    if (computation.instructions_size() > 0 && computation_holding(computation.root_id()) != computation.id()) {
      refuse("computation " + Quoted(computation.name()) + " has root id " + std::to_string(computation.root_id()) +
             ", none of its instructions");
    }
    Dependencies operands;
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      const std::string problem = ShapeProblem(instruction.shape());
      if (!problem.empty()) refuse("instruction " + Quoted(instruction.name()) + " " + problem);
      for (const int64_t operand_id : instruction.operand_ids()) {
        if (operand_id == instruction.id()) {
          refuse("instruction " + Quoted(instruction.name()) + " is its own operand (a cycle)");
        }
        if (computation_holding(operand_id) != computation.id()) {
          refuse("instruction " + Quoted(instruction.name()) + " has operand id " + std::to_string(operand_id) +
                 ", which no instruction of computation " + Quoted(computation.name()) + " has (a dangling operand)");
        }
      }
      for (const int64_t callee : instruction.called_computation_ids()) {
        if (computations.count(callee) == 0) {
          refuse("instruction " + Quoted(instruction.name()) + " calls computation id " + std::to_string(callee) +
                 ", which the module lacks");
        }
      }
      operands.Set(instruction.id(), {instruction.operand_ids().begin(), instruction.operand_ids().end()});
    }
    const std::optional<int64_t> cyclic = FirstInCycle(operands);
    if (cyclic) {
      std::string name;
      for (const xla::HloInstructionProto& instruction : computation.instructions()) {
        if (instruction.id() == *cyclic) name = instruction.name();
      }
      refuse("instruction " + Quoted(name) + " depends on itself through its operands (a cycle in computation " +
             Quoted(computation.name()) + ")");
    }
  }
  Dependencies calls;
  for (const xla::HloComputationProto& computation : module.computations()) {
    std::vector<int64_t> callees;
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      for (const int64_t callee : instruction.called_computation_ids()) {
        if (computations.count(callee)) callees.push_back(callee);
      }
    }
    calls.Set(computation.id(), std::move(callees));
  }
  const std::optional<int64_t> cyclic = FirstInCycle(calls);
  if (cyclic) {
    refuse("computation " + Quoted(computations.at(*cyclic)->name()) +
           " calls itself, directly or through others (a cycle)");
  }
}

}  // namespace tpu_graphs
