#pragma once

namespace vkmoe {

// `vkmoe bench-shaders [--device N] [--kernels q4_k,q8_0,...] [--shapes 2048x768,...]
//  [--iters N] [--bw-mib N] [--pool-mib N] [--experts N] [--config WG:TPR:RPT:SG] [--sweep]`
// argv[0] is the command name; options start at argv[1]. Measures the
// device's read bandwidth, then times the GPU matvec kernels and prints a
// table. Returns 0 on success, 1 (message on stderr) on error.
int bench_shaders_main(int argc, char** argv);

}  // namespace vkmoe
