# Batched attention (engine/vulkan/vk_attention.h): rotary/norm/KV-store and
# flash attention with split-K decode, per KV cache type.
vkmoe_shader(attn_rope_store_f16 attn_rope_store.comp KV_F16=1 KV_Q8=0)
vkmoe_shader(attn_rope_store_f32 attn_rope_store.comp KV_F16=0 KV_Q8=0)
vkmoe_shader(attn_rope_store_q8_0 attn_rope_store.comp KV_F16=0 KV_Q8=1)
vkmoe_shader(attn_rope_store_sg_f16 attn_rope_store_sg.comp KV_F16=1 KV_Q8=0)
vkmoe_shader(attn_rope_store_sg_f32 attn_rope_store_sg.comp KV_F16=0 KV_Q8=0)
vkmoe_shader(attn_flash_f16 attn_flash.comp KV_F16=1 KV_Q8=0)
vkmoe_shader(attn_flash_rope_f16 attn_flash.comp KV_F16=1 KV_Q8=0 ROPE_IN=1)
# ... stamping the device clock at its steps' edges (VKMOE_FUSED_CLOCKS=1).
vkmoe_shader(attn_flash_rope_f16_clock attn_flash.comp KV_F16=1 KV_Q8=0 ROPE_IN=1 CLOCKS=1)
vkmoe_shader(attn_flash_f32 attn_flash.comp KV_F16=0 KV_Q8=0)
vkmoe_shader(attn_flash_q8_0 attn_flash.comp KV_F16=0 KV_Q8=1)
vkmoe_shader(attn_split_reduce attn_split_reduce.comp)
# Prompt attention with cooperative matrices (glslang 15, see gemm_coopmat.cmake).
if(VKMOE_HAVE_COOPMAT_SHADERS)
  vkmoe_coopmat_shader(attn_flash_cm attn_flash_cm.comp)
  vkmoe_coopmat_shader(attn_flash_cm_1p attn_flash_cm.comp ONE_PASS=1)
  vkmoe_coopmat_shader(attn_flash_cm_h attn_flash_cm.comp O_F16=1)
  vkmoe_coopmat_shader(attn_flash_cm_1p_h attn_flash_cm.comp ONE_PASS=1 O_F16=1)
endif()
