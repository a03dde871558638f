// safetensors reader/writer, hostile-safe (formats.md): the public face of src/model/safetensors/.
// file.ts (dtypes, SafeFile = one fd + its validated header, exact preads), header.ts (open + validate
// one file), store.ts (TensorStore: a model's files, single or sharded via the index), read.ts (tensor
// bytes / f32 on demand: models are 370+ GB, only headers are read at open time), write.ts (writer).
// Holds no state itself.
export { DTYPE_SIZE, type Dtype, MAX_HEADER, SafeFile, type TensorInfo } from "./safetensors/file.ts";
export { openSafetensors } from "./safetensors/header.ts";
export { FP8_BLOCK, readBytes, readF32 } from "./safetensors/read.ts";
export { INDEX_FILE, openModel, SINGLE_FILE, TensorStore } from "./safetensors/store.ts";
export { type TensorOut, writeSafetensors } from "./safetensors/write.ts";
