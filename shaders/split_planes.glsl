// A split-K product's partial planes (gemm_coopmat.comp with k_split) read as
// one: SPLIT_PLANES_SUM(T, name, buf, splits, plane) defines T name(uint i),
// the sum of buf[z * plane + i] over z < splits, added in plane order from 0:
// the one order of every reader (gemm_split_sum.comp's sums too), so all of
// them get the same floats.
#define SPLIT_PLANES_SUM(T, name, buf, splits, plane)                     \
  T name(uint i) {                                                        \
    T s = T(0.0);                                                         \
    for (uint z = 0; z < (splits); ++z) s += buf[z * (plane) + i];        \
    return s;                                                             \
  }
