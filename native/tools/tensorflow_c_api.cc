#include "native/tools/tensorflow_c_api.h"

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>
#include <string_view>

namespace tpu_graphs {

// The C API functions used here, looked up in the loaded library by name; each has the type its
// declaration in tensorflow/c/c_api.h gives it.
#define TPU_GRAPHS_TF_FUNCTIONS(X)                                                                            \
  X(TF_NewStatus) X(TF_DeleteStatus) X(TF_GetCode) X(TF_Message) X(TF_NewGraph) X(TF_DeleteGraph)             \
  X(TF_NewSessionOptions) X(TF_DeleteSessionOptions) X(TF_NewBuffer) X(TF_DeleteBuffer)                      \
  X(TF_LoadSessionFromSavedModel) X(TF_CloseSession) X(TF_DeleteSession) X(TF_GraphOperationByName)          \
  X(TF_AllocateTensor) X(TF_TensorData) X(TF_DeleteTensor) X(TF_SessionRun) X(TF_Dim) X(TF_NumDims)

struct SavedModelSession::Api {
#define TPU_GRAPHS_DECLARE(name) decltype(&::name) name;
  TPU_GRAPHS_TF_FUNCTIONS(TPU_GRAPHS_DECLARE)
#undef TPU_GRAPHS_DECLARE
};

namespace {

// Fields of a serialized protocol buffer message, in order: (field number, bytes) for
// length-delimited fields, which are all the MetaGraphDef walk below needs.
std::vector<std::pair<int, std::string_view>> Fields(std::string_view message) {
  std::vector<std::pair<int, std::string_view>> fields;
  size_t at = 0;
  auto varint = [&]() {
    uint64_t value = 0;
    for (int shift = 0; at < message.size(); shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(message[at++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    throw std::runtime_error("malformed MetaGraphDef");
  };
  while (at < message.size()) {
    const uint64_t key = varint();
    switch (key & 7) {
      case 0: varint(); break;
      case 1: at += 8; break;
      case 5: at += 4; break;
      case 2: {
        const uint64_t length = varint();
        if (at + length > message.size()) throw std::runtime_error("malformed MetaGraphDef");
        fields.emplace_back(static_cast<int>(key >> 3), message.substr(at, length));
        at += length;
        break;
      }
      default: throw std::runtime_error("malformed MetaGraphDef");
    }
  }
  return fields;
}

std::string_view Field(std::string_view message, int number) {
  for (const auto& [field, bytes] : Fields(message)) {
    if (field == number) return bytes;
  }
  return {};
}

// map<string, TensorInfo> entries (key = 1, value = 2) -> TensorInfo.name (field 1).
std::map<std::string, std::string> TensorNames(std::string_view signature, int map_field) {
  std::map<std::string, std::string> names;
  for (const auto& [field, entry] : Fields(signature)) {
    if (field == map_field) names[std::string(Field(entry, 1))] = std::string(Field(Field(entry, 2), 1));
  }
  return names;
}

TF_DataType DataType(const std::string& dtype) {
  if (dtype == "<f4") return TF_FLOAT;
  if (dtype == "|u1") return TF_UINT8;
  if (dtype == "<i8") return TF_INT64;
  throw std::runtime_error("no TensorFlow type for dtype " + dtype);
}

size_t ValueSize(TF_DataType type) { return type == TF_UINT8 ? 1 : type == TF_FLOAT ? 4 : 8; }

}  // namespace

SavedModelSession::SavedModelSession(void* tensorflow, const std::string& export_dir)
    : api_(new Api), export_dir_(export_dir) {
#define TPU_GRAPHS_LOOK_UP(name)                                                                     \
  api_->name = reinterpret_cast<decltype(&::name)>(dlsym(tensorflow, #name));                        \
  if (api_->name == nullptr) throw std::runtime_error("the TensorFlow library has no " #name);
  TPU_GRAPHS_TF_FUNCTIONS(TPU_GRAPHS_LOOK_UP)
#undef TPU_GRAPHS_LOOK_UP
  TF_Status* status = api_->TF_NewStatus();
  TF_SessionOptions* options = api_->TF_NewSessionOptions();
  TF_Buffer* meta_graph = api_->TF_NewBuffer();
  graph_ = api_->TF_NewGraph();
  const char* tags[] = {"serve"};
  session_ = api_->TF_LoadSessionFromSavedModel(options, nullptr, export_dir.c_str(), tags, 1, graph_, meta_graph, status);
  const bool loaded = api_->TF_GetCode(status) == TF_OK;
  const std::string message = api_->TF_Message(status);
  const std::string_view meta(static_cast<const char*>(meta_graph->data), meta_graph->length);
  std::string_view signature;
  for (const auto& [field, entry] : loaded ? Fields(meta) : decltype(Fields(meta)){}) {
    if (field == 5 && Field(entry, 1) == "serving_default") signature = Field(entry, 2);  // signature_def map
  }
  input_tensors_ = TensorNames(signature, 1);
  const auto outputs = TensorNames(signature, 2);
  api_->TF_DeleteBuffer(meta_graph);
  api_->TF_DeleteSessionOptions(options);
  api_->TF_DeleteStatus(status);
  if (!loaded) throw std::runtime_error(export_dir + ": cannot load the SavedModel: " + message);
  kind_ = input_tensors_.count("config_feat") ? "tile" : input_tensors_.count("node_config_feat") ? "layout" : "";
  if (kind_.empty() || !outputs.count("scores")) {
    throw std::runtime_error(export_dir + ": its serving_default signature does not score tile or layout graphs");
  }
  output_tensor_ = outputs.at("scores");
}

SavedModelSession::~SavedModelSession() {
  TF_Status* status = api_->TF_NewStatus();
  if (session_ != nullptr) {
    api_->TF_CloseSession(session_, status);
    api_->TF_DeleteSession(session_, status);
  }
  api_->TF_DeleteGraph(graph_);
  api_->TF_DeleteStatus(status);
  delete api_;
}

std::vector<float> SavedModelSession::Score(const std::vector<Input>& inputs) {
  auto output_of = [&](const std::string& tensor) {
    const size_t colon = tensor.rfind(':');
    TF_Operation* operation = api_->TF_GraphOperationByName(graph_, tensor.substr(0, colon).c_str());
    if (operation == nullptr) throw std::runtime_error(export_dir_ + ": no operation for " + tensor);
    return TF_Output{operation, colon == std::string::npos ? 0 : std::stoi(tensor.substr(colon + 1))};
  };
  std::vector<TF_Output> feeds;
  std::vector<TF_Tensor*> values;
  for (const Input& input : inputs) {
    const auto tensor = input_tensors_.find(input.name);
    if (tensor == input_tensors_.end()) throw std::runtime_error(export_dir_ + ": the signature takes no " + input.name);
    std::vector<int64_t> dims = input.array->shape;
    if (input.rows >= 0) dims[0] = input.rows;
    const TF_DataType type = DataType(input.array->dtype);
    size_t count = 1;
    for (int64_t d : dims) count *= static_cast<size_t>(d);
    TF_Tensor* value = api_->TF_AllocateTensor(type, dims.data(), static_cast<int>(dims.size()), count * ValueSize(type));
    std::memcpy(api_->TF_TensorData(value), input.array->data.data() + input.offset * ValueSize(type), count * ValueSize(type));
    feeds.push_back(output_of(tensor->second));
    values.push_back(value);
  }
  TF_Output fetch = output_of(output_tensor_);
  TF_Tensor* result = nullptr;
  TF_Status* status = api_->TF_NewStatus();
  api_->TF_SessionRun(session_, nullptr, feeds.data(), values.data(), static_cast<int>(feeds.size()), &fetch, &result, 1,
                      nullptr, 0, nullptr, status);
  for (TF_Tensor* value : values) api_->TF_DeleteTensor(value);
  const bool ok = api_->TF_GetCode(status) == TF_OK;
  const std::string message = api_->TF_Message(status);
  api_->TF_DeleteStatus(status);
  if (!ok) throw std::runtime_error(export_dir_ + ": the SavedModel refused the input: " + message);
  const float* scores = static_cast<const float*>(api_->TF_TensorData(result));
  std::vector<float> out(scores, scores + api_->TF_Dim(result, 0));
  api_->TF_DeleteTensor(result);
  return out;
}

}  // namespace tpu_graphs
