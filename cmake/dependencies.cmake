# The libraries encore builds with. A missing one is reported together with every other
# missing one and the Debian/Ubuntu packages that provide them, in one error that
# `pip install .` shows too, instead of as CMake's first failed find_package.

# OpenBLAS is found by file rather than by its CMake config, whose paths are absolute: the
# GPU check unpacks Debian packages into a prefix (tests/gpu/run.sh, CMAKE_PREFIX_PATH).
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas)
find_library(OPENBLAS_LIBRARY NAMES openblas PATH_SUFFIXES openblas-pthread)
find_package(dnnl CONFIG QUIET)
# Checkpoints (nn/checkpoint.cpp): the safetensors JSON header and its CRC-32 checksums. The
# runtime name is a fallback for the GPU check's prefix, where zlib1g-dev's absolute libz.so
# link may dangle.
find_package(nlohmann_json CONFIG QUIET)
find_library(ZLIB_LIBRARY NAMES z libz.so.1)
find_package(ZLIB QUIET)
# oneDNN runs its threads on OpenMP: ops/build_info.cpp asks the OpenMP runtime how many
# (it is linked, nothing is compiled with -fopenmp).
find_package(OpenMP QUIET COMPONENTS CXX)
if(ENCORE_TESTS)
  find_package(GTest QUIET)
endif()
if(ENCORE_PYTHON)
  find_package(Python 3.9 QUIET COMPONENTS Interpreter Development.Module)
endif()

set(ENCORE_MISSING "")
set(ENCORE_MISSING_PACKAGES "")
# encore_require(<what> <Debian package> <variables that must all be true>...)
function(encore_require what package)
  foreach(variable IN LISTS ARGN)
    if(NOT ${variable})
      set(ENCORE_MISSING "${ENCORE_MISSING}\n  ${what} (Debian/Ubuntu package ${package})" PARENT_SCOPE)
      set(ENCORE_MISSING_PACKAGES "${ENCORE_MISSING_PACKAGES} ${package}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()
encore_require("OpenBLAS" libopenblas-dev CBLAS_INCLUDE_DIR OPENBLAS_LIBRARY)
encore_require("oneDNN" libdnnl-dev dnnl_FOUND)
encore_require("nlohmann-json" nlohmann-json3-dev nlohmann_json_FOUND)
encore_require("zlib" zlib1g-dev ZLIB_FOUND)
encore_require("OpenMP" libgomp1 OpenMP_CXX_FOUND)
if(ENCORE_TESTS)
  encore_require("GoogleTest (or configure with -DENCORE_TESTS=OFF)" libgtest-dev GTest_FOUND)
endif()
if(ENCORE_PYTHON)
  encore_require("Python headers" python3-dev Python_FOUND)
endif()
if(ENCORE_MISSING)
  message(FATAL_ERROR "encore cannot be built; missing:${ENCORE_MISSING}\n"
          "Install them with\n  sudo apt-get install${ENCORE_MISSING_PACKAGES}\n"
          "(scripts/setup.sh installs everything encore needs), or point CMAKE_PREFIX_PATH at "
          "where they are.")
endif()
