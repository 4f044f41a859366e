# Per-head products of latent attention (engine/vulkan/vk_head_matmul.h):
# head_matmul_<type>.
vkmoe_shader_per_type(head_matmul head_matmul.comp)
