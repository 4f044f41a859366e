vkmoe_shader(add_rows add_rows.comp)
