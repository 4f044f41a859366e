// q8x_type.glsl for all four of its types at once, for a weight whose type is
// a specialization constant (the branches of the other types fold away when
// the pipeline is made). The includer declares the weight's buffer as uvec4s
// <slot>_w4[] and as uints <slot>_w1[], defines Q8X_SLOT (the slot's name,
// e.g. g), and gets q8x_type.glsl's names prefixed <slot><type>_ (e.g.
// g5_load_w for Q4_K). Q8X_SLOT is undefined at the end.
#ifndef Q8X_PASTE
#define Q8X_PASTE_(s, t, n) s##t##_##n
#define Q8X_PASTE(s, t, n) Q8X_PASTE_(s, t, n)
#define Q8X_CAT_(a, b) a##b
#define Q8X_CAT(a, b) Q8X_CAT_(a, b)
#endif
#define Q8X_W4(i) Q8X_CAT(Q8X_SLOT, _w4)[i]
#define Q8X_W1(i) Q8X_CAT(Q8X_SLOT, _w1)[i]

#define Q8X_WT 4
#define Q8X(n) Q8X_PASTE(Q8X_SLOT, 4, n)
#include "q8x_type.glsl"
#undef Q8X
#undef Q8X_WT
#define Q8X_WT 5
#define Q8X(n) Q8X_PASTE(Q8X_SLOT, 5, n)
#include "q8x_type.glsl"
#undef Q8X
#undef Q8X_WT
#define Q8X_WT 6
#define Q8X(n) Q8X_PASTE(Q8X_SLOT, 6, n)
#include "q8x_type.glsl"
#undef Q8X
#undef Q8X_WT
#define Q8X_WT 7
#define Q8X(n) Q8X_PASTE(Q8X_SLOT, 7, n)
#include "q8x_type.glsl"
#undef Q8X
#undef Q8X_WT

#undef Q8X_SLOT
#undef Q8X_W4
#undef Q8X_W1
