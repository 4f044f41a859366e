# Tiled GEMM (engine/vulkan/vk_gemm.cpp): gemm_<type> and the expert-grouped
# gemm_ids_<type> over a MoeTable.
vkmoe_shader_per_type(gemm gemm.comp)
vkmoe_shader_per_type(gemm_ids gemm.comp INDEXED=1)
# f16 activation rows for the coopmat2 GEMM (gemm_coopmat2.cpp).
vkmoe_shader(to_f16 to_f16.comp)
vkmoe_shader(to_f16_ids to_f16.comp INDEXED=1)
# The sum of a split-K product's partial planes (gemm_coopmat.cpp).
vkmoe_shader(gemm_split_sum gemm_split_sum.comp)
vkmoe_shader(gemm_split_sum_norm gemm_split_sum.comp NORM=1)
