#include <cstdio>
int main() { std::puts("qloom"); return 0; }
