// Workgroup-wide sum/max: each subgroup reduces in registers, then every
// subgroup reduces the subgroups' partials again (two barriers, no serial
// chain). WG must be a multiple of the subgroup size and equal to
// gl_WorkGroupSize.x; every invocation must call these.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
shared float red_buf[WG];
float wg_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) red_buf[gl_SubgroupID] = v;
  barrier();
  float r = 0.0;
  for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) r += red_buf[i];
  r = subgroupAdd(r);
  barrier();
  return r;
}
float wg_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) red_buf[gl_SubgroupID] = v;
  barrier();
  float r = -3.4028235e38;
  for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) r = max(r, red_buf[i]);
  r = subgroupMax(r);
  barrier();
  return r;
}
