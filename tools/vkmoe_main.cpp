#include <cstdio>
int main() { std::puts("vkmoe: under construction"); return 0; }
