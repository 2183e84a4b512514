# A program compiled as C++17 that includes encore is stopped with the reason (core/cxx20.h),
# and with nothing else: no cascade of errors from the C++20 code after it.
#   cmake -DCXX=<compiler> -DSOURCE_DIR=<encore's sources> -DHEADER=<public header> -P check_cxx17.cmake
cmake_minimum_required(VERSION 3.24)

execute_process(COMMAND "${CXX}" -std=c++17 -fsyntax-only -I "${SOURCE_DIR}" -x c++ -include "${SOURCE_DIR}/${HEADER}" /dev/null
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${HEADER} compiled as C++17 without an error")
endif()
if(NOT err MATCHES "error: (#error )?\"encore needs C\\+\\+20: compile with -std=c\\+\\+20")
  message(FATAL_ERROR "${HEADER} as C++17: no 'encore needs C++20' error:\n${err}")
endif()
# The #error (GCC quotes the directive, Clang its text), and the missing header that ends the
# compilation there.
string(REGEX MATCHALL "error: [^\n]*" errors "${err}")
list(FILTER errors EXCLUDE REGEX "^error: (#error )?\"encore needs C\\+\\+20|encore_needs_cxx20")
if(errors)
  message(FATAL_ERROR "${HEADER} as C++17: errors besides the C++20 one:\n${err}")
endif()
message(STATUS "${HEADER}: ${err}")
