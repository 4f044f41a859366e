vkmoe_shader(add_rows add_rows.comp)
vkmoe_shader(bias_rows bias_rows.comp)
vkmoe_shader(copy_finite copy_finite.comp)
# get_rows_<type>: token rows of the embedding table decoded on the GPU (WTYPE ids: shaders/wtype.glsl).
foreach(t f32:1 f16:2 bf16:3 q8_0:4 q4_k:5 q5_k:6 q6_k:7 q4_0:8 q4_1:9 q5_0:10 q5_1:11 iq4_nl:12 mxfp4:13
          q2_k:14 q3_k:15 iq4_xs:16)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  vkmoe_shader(get_rows_${tname} get_rows.comp WTYPE=${tid})
endforeach()
