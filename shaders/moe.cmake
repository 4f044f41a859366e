# MoE routing over a ubatch (engine/vulkan/vk_moe.h): router top-k (shared-memory
# and subgroup variants), grouping of the routing pairs by expert, combine.
vkmoe_shader(moe_topk_batch moe_topk_batch.comp SUBGROUP=0)
vkmoe_shader(moe_topk_batch_sg moe_topk_batch.comp SUBGROUP=1)
vkmoe_shader(moe_group moe_group.comp)
vkmoe_shader(moe_combine moe_combine.comp)
vkmoe_shader(moe_combine_rows_norm moe_combine.comp NORM=1)
# One decoded token's MoE block in one dispatch (vk_moe_fused.h), per gate/up and down type.
foreach(gu q8_0:4 q4_k:5 q5_k:6 q6_k:7)
  foreach(dn q8_0:4 q4_k:5 q5_k:6 q6_k:7)
    string(REPLACE ":" ";" guv ${gu})
    string(REPLACE ":" ";" dnv ${dn})
    list(GET guv 0 gun)
    list(GET guv 1 gui)
    list(GET dnv 0 dnn)
    list(GET dnv 1 dni)
    vkmoe_shader(moe_decode_fused_${gun}_${dnn} moe_decode_fused.comp GU_WT=${gui} DN_WT=${dni})
  endforeach()
endforeach()
