# int8 dot-product GEMM path (engine/vulkan/gemm_int8.cpp): the activation
# quantizer and gemm_int8_<type> / gemm_int8_ids_<type> (expert-grouped).
vkmoe_shader(quantize_q8 quantize_q8.comp)
vkmoe_shader(quantize_q8_ids quantize_q8.comp INDEXED=1)
foreach(t q8_0:4 q4_k:5 q5_k:6 q6_k:7)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  vkmoe_shader(gemm_int8_${tname} gemm_int8.comp WTYPE=${tid})
  vkmoe_shader(gemm_int8_ids_${tname} gemm_int8.comp WTYPE=${tid} INDEXED=1)
endforeach()
