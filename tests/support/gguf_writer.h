#pragma once
// The tests' names for the GGUF writer and quantizers of flashserve_gguf
// (model/gguf/gguf_writer.h, model/gguf/quantize.h): one writer for tests and tools. Tests
// build in-memory images (GgufWriter::bytes() -> GgufFile::from_bytes) or files, including
// hostile ones (wrong counts, raw value types, explicit tensor offsets).
#include "base/bf16.h"
#include "model/gguf/gguf_writer.h"
#include "model/gguf/quantize.h"

namespace flashserve::testing {

using model::GgmlType;
using model::GgufValue;
using model::GgufValueType;
using model::GgufWriter;

using model::gguf_array;
using model::gguf_bool;
using model::gguf_f32;
using model::gguf_f32_array;
using model::gguf_f64;
using model::gguf_i16;
using model::gguf_i32;
using model::gguf_i32_array;
using model::gguf_i64;
using model::gguf_i8;
using model::gguf_int;
using model::gguf_string;
using model::gguf_string_array;
using model::gguf_u16;
using model::gguf_u32;
using model::gguf_u64;
using model::gguf_u8;
using model::gguf_uint;

using model::fp32_to_fp16;
using model::quantize_q4_0;
using model::quantize_q4_1;
using model::quantize_q8_0;

}  // namespace flashserve::testing
