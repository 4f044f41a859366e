# Per-head products of latent attention (engine/vulkan/vk_head_matmul.h):
# head_matmul_<type>. WTYPE ids: shaders/wtype.glsl.
foreach(t f32:1 f16:2 bf16:3 q8_0:4 q4_k:5 q5_k:6 q6_k:7 q4_0:8 q4_1:9 q5_0:10 q5_1:11 iq4_nl:12 mxfp4:13
          q2_k:14 q3_k:15 iq4_xs:16)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  vkmoe_shader(head_matmul_${tname} head_matmul.comp WTYPE=${tid})
endforeach()
