// Weight type ids (WTYPE) of matvec.comp and gemm.comp, and the block layout
// of the types whose decoders live in dequant.glsl (WTYPE >= WT_Q4_0):
// DQ_QK elements in DQ_BYTES bytes, read in loads of DQ_UNIT bytes (the
// blocks' alignment: MXFP4's 17-byte blocks are read byte by byte; the
// matvec reads MXFP4 and IQ4_XS in 32-bit words instead, see matvec.comp).
// Include before any declaration (it may enable extensions).
#define WT_F32 1
#define WT_F16 2
#define WT_BF16 3
#define WT_Q8_0 4
#define WT_Q4_K 5
#define WT_Q5_K 6
#define WT_Q6_K 7
#define WT_Q4_0 8
#define WT_Q4_1 9
#define WT_Q5_0 10
#define WT_Q5_1 11
#define WT_IQ4_NL 12
#define WT_MXFP4 13
#define WT_Q2_K 14
#define WT_Q3_K 15
#define WT_IQ4_XS 16

#if WTYPE > WT_IQ4_XS
#error "unknown WTYPE"
#elif WTYPE >= WT_Q4_0
#define DQ 1
#if WTYPE == WT_Q2_K || WTYPE == WT_Q3_K || WTYPE == WT_IQ4_XS
#define DQ_QK 256
#else
#define DQ_QK 32
#endif
#if WTYPE == WT_Q4_0 || WTYPE == WT_IQ4_NL
#define DQ_BYTES 18
#elif WTYPE == WT_Q4_1
#define DQ_BYTES 20
#elif WTYPE == WT_Q5_0
#define DQ_BYTES 22
#elif WTYPE == WT_Q5_1
#define DQ_BYTES 24
#elif WTYPE == WT_MXFP4
#define DQ_BYTES 17
#elif WTYPE == WT_Q2_K
#define DQ_BYTES 84
#elif WTYPE == WT_Q3_K
#define DQ_BYTES 110
#else
#define DQ_BYTES 136
#endif
#if WTYPE == WT_MXFP4
#define DQ_UNIT 1
#extension GL_EXT_shader_8bit_storage : require
#elif WTYPE == WT_Q2_K || WTYPE == WT_IQ4_XS
#define DQ_UNIT 4
#else
#define DQ_UNIT 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#endif
