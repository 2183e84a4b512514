// What this encore is: its version, and the libraries, threads and devices it runs on, for
// bug reports (Python: encore.__version__, encore.show_config(), python -m encore.info).
#pragma once

#include <string>

namespace encore {

/// encore's version, "MAJOR.MINOR.PATCH": the CMake package's version, which the Python
/// package shares.
const char* version();

/// A report to paste into a bug report: encore's version and build, the versions of the
/// libraries as loaded (oneDNN, OpenBLAS and its configuration, zlib; the CUDA runtime and
/// driver, cuBLAS and cuDNN when the CUDA backend is loaded), the thread counts of OpenMP,
/// OpenBLAS and oneDNN, and the backends with their devices (or why there are none:
/// core/backend.h).
std::string show_config();

}  // namespace encore
