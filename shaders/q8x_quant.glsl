// x -> int8 per 32-element block for the int8-activation products
// (q8x_type.glsl): dx = max|x| / 127, q = round(x / dx). Writes xq (ivec4[],
// 16 int8 per entry) and xds (vec2 per block: dx, dx * sum of its int8s),
// which the includer declares.
void q8x_quantize_block(vec4 v[8], uint blk) {
  float amax = 0.0;
  [[unroll]] for (uint i = 0; i < 8; ++i) {
    const vec4 a = abs(v[i]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  const float dx = amax / 127.0;
  const float inv = amax > 0.0 ? 127.0 / amax : 0.0;
  int isum = 0;
  [[unroll]] for (uint i = 0; i < 8; ++i) {
    const ivec4 q = ivec4(round(v[i] * inv));
    isum += (q.x + q.y) + (q.z + q.w);
    const uvec4 b = uvec4(q) & 0xFFu;
    xq[blk * 2 + i / 4][i % 4] = int(b.x | (b.y << 8) | (b.z << 16) | (b.w << 24));
  }
  xds[blk] = vec2(dx, dx * float(isum));
}
