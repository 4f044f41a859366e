// Linked into the executables of sanitizer builds only. The Vulkan loader
// dlcloses the ICDs (lavapipe) when the last instance goes; allocations those
// drivers keep in their globals for the process's lifetime then become
// unreachable from an unmapped "<unknown module>" that no suppression can
// name. Keeping every module mapped leaves them reachable (and attributable
// to a named library in lsan.supp) without hiding leaks of vkmoe's own.
extern "C" int dlclose(void*) { return 0; }
