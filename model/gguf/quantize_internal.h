#pragma once
// Internal to model/gguf: the block encoders of quantize_kquants.cc, which quantize.cc's
// quantize_row dispatches to. Each encodes one block (32 elements for IQ4_NL, 256 for the
// others) of `x` into `out` (the type's block_bytes).
#include <cstdint>

namespace flashserve::model::quant_internal {

void encode_q2_k_block(const float* x, uint8_t* out);
void encode_q3_k_block(const float* x, uint8_t* out);
void encode_q4_k_block(const float* x, uint8_t* out);
void encode_q5_k_block(const float* x, uint8_t* out);
void encode_q6_k_block(const float* x, uint8_t* out);
void encode_iq4_nl_block(const float* x, uint8_t* out);
void encode_iq4_xs_block(const float* x, uint8_t* out);

}  // namespace flashserve::model::quant_internal
