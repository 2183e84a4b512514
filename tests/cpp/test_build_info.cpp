// encore::version() and encore::show_config(): what a bug report needs to say.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "ops/build_info.h"

namespace encore {
namespace {

TEST(BuildInfo, VersionIsTheCMakeProjectVersion) {
  EXPECT_STREQ(version(), ENCORE_PROJECT_VERSION);
}

TEST(BuildInfo, ShowConfigNamesVersionsThreadsAndBackends) {
  const std::string config = show_config();
  EXPECT_EQ(config.rfind(std::string("encore ") + version() + " (", 0), 0u) << config;
  for (const char* expected :
       {"\n  oneDNN ", "\n  BLAS: OpenBLAS ", "\n  zlib ", "\n  OpenMP max threads: ",
        "\n  OpenBLAS threads: ", "\n  oneDNN threads: ", "\nbackends:\n  cpu: yes\n"}) {
    EXPECT_NE(config.find(expected), std::string::npos) << expected << " in\n" << config;
  }
  if (cuda_built()) {
    for (const char* expected :
         {"\n  CUDA runtime ", ", cuDNN ", "\n  cuda: built for CUDA architectures "})
      EXPECT_NE(config.find(expected), std::string::npos) << expected << " in\n" << config;
  } else {
    EXPECT_NE(config.find("\n  cuda: not built"), std::string::npos) << config;
  }
}

}  // namespace
}  // namespace encore
