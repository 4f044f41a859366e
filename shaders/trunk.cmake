vkmoe_shader(add_rows add_rows.comp)
vkmoe_shader(bias_rows bias_rows.comp)
vkmoe_shader(copy_finite copy_finite.comp)
# get_rows_<type>: token rows of the embedding table decoded on the GPU.
vkmoe_shader_per_type(get_rows get_rows.comp)
