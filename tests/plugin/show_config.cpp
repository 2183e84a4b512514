// Prints encore::show_config() and whether CUDA is available and why not, for
// tests/plugin/check_plugin.py to run under the loader environments it sets up.
#include <iostream>

#include "core/device.h"
#include "ops/build_info.h"

int main() {
  std::cout << encore::show_config();
  std::cout << "cuda available: " << (encore::cuda::is_available() ? "yes" : "no") << "\n";
  std::cout << "cuda unavailable reason: " << encore::cuda::unavailable_reason() << "\n";
}
