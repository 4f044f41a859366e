#version 450
// Adds rows of a bias table chosen by an id buffer:
//   y[yr*y_stride + i] += bias[e*width + i]   for i < width, r < rows,
//   e = ids[id_off + r / rows_per_id], then e = map[e] when use_map;
//   yr = r, or ids[y_row_map - 1 + r] when y_row_map != 0 (negative: skipped);
// rows whose id (or mapped id) is negative or >= n_bias are left as they are.
// Decode: one id per expert row (expert ids, -1: skipped). Grouped prefill:
// the MoE table's tile -> group words (rows_per_id = MOE_TILE_ROWS), mapped
// from pool slot to expert in offload modes; the down product's rows by
// routing pair (y_row_map: the table's slot_pair words).
// Workgroups: x over i (WG columns each), y over rows (strided past 65535).
#define WG 256
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer B { float bias[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) readonly buffer M { int map[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint width, rows, y_stride, id_off, rows_per_id, use_map, n_bias, y_row_map;
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.width) return;
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y) {
    int e = ids[p.id_off + r / p.rows_per_id];
    if (e >= 0 && p.use_map != 0u) e = map[e];
    if (e < 0 || uint(e) >= p.n_bias) continue;
    const int yr = p.y_row_map != 0 ? ids[p.y_row_map - 1 + r] : int(r);
    if (yr >= 0) y[uint(yr) * p.y_stride + i] += bias[uint(e) * p.width + i];
  }
}
