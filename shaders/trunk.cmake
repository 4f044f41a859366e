vkmoe_shader(add_rows add_rows.comp)
vkmoe_shader(bias_rows bias_rows.comp)
vkmoe_shader(copy_finite copy_finite.comp)
