# Tiled GEMM (engine/vulkan/vk_gemm.cpp): gemm_<type> and the expert-grouped
# gemm_ids_<type> over a MoeTable. WTYPE ids: shaders/wtype.glsl.
foreach(t f32:1 f16:2 bf16:3 q8_0:4 q4_k:5 q5_k:6 q6_k:7 q4_0:8 q4_1:9 q5_0:10 q5_1:11 iq4_nl:12 mxfp4:13
          q2_k:14 q3_k:15 iq4_xs:16)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  vkmoe_shader(gemm_${tname} gemm.comp WTYPE=${tid})
  vkmoe_shader(gemm_ids_${tname} gemm.comp WTYPE=${tid} INDEXED=1)
endforeach()
# f16 activation rows for the coopmat2 GEMM (gemm_coopmat2.cpp).
vkmoe_shader(to_f16 to_f16.comp)
vkmoe_shader(to_f16_ids to_f16.comp INDEXED=1)
# The sum of a split-K product's partial planes (gemm_coopmat.cpp).
vkmoe_shader(gemm_split_sum gemm_split_sum.comp)
