# MoE routing over a ubatch (engine/vulkan/vk_moe.h): router top-k (shared-memory
# and subgroup variants), grouping of the routing pairs by expert, combine.
vkmoe_shader(moe_topk_batch moe_topk_batch.comp SUBGROUP=0)
vkmoe_shader(moe_topk_batch_sg moe_topk_batch.comp SUBGROUP=1)
vkmoe_shader(moe_group moe_group.comp)
vkmoe_shader(moe_combine moe_combine.comp)
vkmoe_shader(moe_combine_rows_norm moe_combine.comp NORM=1)
# One decoded token's MoE block in one dispatch (vk_moe_fused.h); weight types
# by specialization constants.
vkmoe_shader(moe_decode_fused moe_decode_fused.comp CLOCKS=0)
# ... stamping the device clock at its steps' edges (VKMOE_FUSED_CLOCKS=1).
vkmoe_shader(moe_decode_fused_clock moe_decode_fused.comp CLOCKS=1)
