// encore's headers are C++20 (concepts, std::span, designated initializers). A program compiled
// as an older C++ is stopped here, with the reason, before the first C++20 construct buries it
// under errors that do not say so. Every public entry header and every core header includes
// this first.
#pragma once

#if __cplusplus < 202002L
#error \
    "encore needs C++20: compile with -std=c++20 (CMake: link encore::encore, which requires cxx_std_20, or set CMAKE_CXX_STANDARD 20)"
// GCC and Clang go on after #error; a missing header ends the compilation at once, so the line
// above is the last one the compiler prints, not the first of a hundred.
#include <encore_needs_cxx20>
#endif
