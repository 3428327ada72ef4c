// probe_pages.cuh - the decode probes' block tables (standalone nvcc
// experiments, not part of the product): `items` lists of `topk` pages
// drawn uniformly from a pool of `pool` pages, distinct within a list, as
// the anchors' random block tables; copied to the device.
#ifndef PROBE_PAGES_CUH
#define PROBE_PAGES_CUH

#include "graph_time.cuh" // CK

#include <random>
#include <vector>

inline std::vector<int> probe_distinct_pages(int items, int topk, int pool, std::mt19937 &rng) {
  std::vector<int> h((size_t)items * topk);
  for (int it = 0; it < items; it++)
    for (int k = 0; k < topk; k++) {
      int p;
      bool again;
      do {
        p = (int)(rng() % (unsigned)pool);
        again = false;
        for (int j = 0; j < k; j++) again |= h[(size_t)it * topk + j] == p;
      } while (again);
      h[(size_t)it * topk + k] = p;
    }
  return h;
}

// The same lists in device memory (cudaFree them).
inline int *probe_device_pages(int items, int topk, int pool, std::mt19937 &rng) {
  const std::vector<int> h = probe_distinct_pages(items, topk, pool, rng);
  int *d;
  CK(cudaMalloc(&d, h.size() * sizeof(int)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
  return d;
}

#endif // PROBE_PAGES_CUH
