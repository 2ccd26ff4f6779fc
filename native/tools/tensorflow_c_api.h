// A SavedModel's plain signature (serving_default) run through TensorFlow's C API, with
// libtensorflow_cc.so.2 loaded at run time: LLVM MLGO's development mode, where the model is
// evaluated by TensorFlow itself rather than compiled in.
#ifndef TPU_GRAPHS_NATIVE_TOOLS_TENSORFLOW_C_API_H_
#define TPU_GRAPHS_NATIVE_TOOLS_TENSORFLOW_C_API_H_

#include <map>
#include <string>
#include <vector>

#include "native/npz/npz.h"
#include "tensorflow/c/c_api.h"

namespace tpu_graphs {

class SavedModelSession {
 public:
  // An input of the signature: `rows` rows of `array` from value `offset` on (-1: all rows).
  struct Input {
    std::string name;
    const Array* array;
    int64_t offset;
    int64_t rows;
  };

  // Loads `export_dir` (tag "serve") with the C API of `tensorflow` (a dlopen handle). Throws
  // std::runtime_error naming the directory and the problem.
  SavedModelSession(void* tensorflow, const std::string& export_dir);
  ~SavedModelSession();
  SavedModelSession(const SavedModelSession&) = delete;
  SavedModelSession& operator=(const SavedModelSession&) = delete;

  // "tile" or "layout": which graphs the signature's inputs describe.
  const std::string& kind() const { return kind_; }
  // The signature's "scores" for these inputs; the signature's own checks (NaN, ids out of
  // range, ...) come back as std::runtime_error with TensorFlow's message.
  std::vector<float> Score(const std::vector<Input>& inputs);

 private:
  struct Api;
  Api* api_;
  std::string export_dir_, kind_;
  std::map<std::string, std::string> input_tensors_;  // signature input name -> graph tensor "op:index"
  std::string output_tensor_;
  TF_Graph* graph_ = nullptr;
  TF_Session* session_ = nullptr;
};

}  // namespace tpu_graphs

#endif  // TPU_GRAPHS_NATIVE_TOOLS_TENSORFLOW_C_API_H_
